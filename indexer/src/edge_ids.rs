//! Shared edge ends: one allocation per distinct unit id among the edges built together (see
//! `fresco_graph::Edge`), instead of one per edge end.

use std::sync::Arc;

use rustc_hash::FxHashSet;

#[derive(Default)]
pub(crate) struct EdgeIds(FxHashSet<Arc<str>>);

impl EdgeIds {
    /// `id`, shared with every earlier edge end of the same id.
    pub(crate) fn get(&mut self, id: &str) -> Arc<str> {
        if let Some(shared) = self.0.get(id) {
            return shared.clone();
        }
        let shared: Arc<str> = Arc::from(id);
        self.0.insert(shared.clone());
        shared
    }
}
