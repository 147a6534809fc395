//! Evidence from code like the target: its analogues (the text lanes' best hits), its family
//! (the methods of its name in its file, on its class's bases and in its subclasses), its name
//! siblings, its namesakes, and the other code working with the classes its header names. What
//! they use in their bodies, the target's body likely needs.
//!
//! Separate from the neighbours' evidence: these units are chosen for being like the target (by
//! text, name or type), wherever they live, and each group is bounded ([`ANALOGUES`],
//! [`FAMILY_MEMBERS`], [`TYPE_USERS`]).

use fresco_graph::{EdgeKind, Snapshot, UnitKind};
use rustc_hash::{FxHashMap, FxHashSet};

use super::ids::{body_edges, class_and_bases, is_test_path, is_within, last_name, owner_of, without_lambdas};
use super::rrf;
use super::target::{Target, target_name, target_owner};
use crate::ast::Lane;

/// How many of the text lanes' best hits count as the target's analogues.
pub const ANALOGUES: usize = 10;

/// The target's analogues: the units the text lanes (lexical and dense, fused) find most like
/// it, the target itself and what it contains left out. Functions that read like the target
/// tend to use what the target needs (`Session.put` and `Session.patch` both call
/// `Session.request`); the graph lane counts their uses.
pub fn analogues(text_lanes: &[(Lane, Vec<String>)], target: &Target) -> Vec<String> {
    let lists: Vec<&[String]> =
        text_lanes.iter().filter(|(l, _)| *l != Lane::Graph).map(|(_, ids)| ids.as_slice()).collect();
    let inside_target = |id: &str| target.id.as_deref().is_some_and(|t| is_within(id, t));
    rrf(&lists).into_iter().map(|(id, _)| id).filter(|id| !inside_target(id)).take(ANALOGUES).collect()
}

/// What the target's analogues use in their bodies: per used unit, the sum of 1 / rank of the
/// analogues that call, read or inherit it, and the used units in order of first appearance.
/// Also what they use of their own class or module, carried over by name to the target's
/// (`role`).
pub(super) struct AnalogueUsage {
    score: FxHashMap<String, f64>,
    pub(super) order: Vec<String>,
    role: FxHashMap<String, f64>,
}

impl AnalogueUsage {
    pub(super) fn of(snapshot: &Snapshot, target: &Target, analogues: &[String]) -> AnalogueUsage {
        let mut score: FxHashMap<String, f64> = FxHashMap::default();
        let mut order: Vec<String> = Vec::new();
        let mut role: FxHashMap<String, f64> = FxHashMap::default();
        let target_owner = target_owner(target);
        for (i, analogue) in analogues.iter().enumerate() {
            let weight = 1.0 / (i + 1) as f64;
            let analogue_owner = owner_of(analogue);
            let mut counted: FxHashSet<&str> = FxHashSet::default();
            for e in body_edges(snapshot, analogue) {
                if !matches!(e.kind, EdgeKind::Calls | EdgeKind::References | EdgeKind::Inherits)
                    || target.id.as_deref() == Some(&*e.dst)
                    || !counted.insert(&*e.dst)
                {
                    continue;
                }
                let entry = score.entry(e.dst.to_string()).or_insert_with(|| {
                    order.push(e.dst.to_string());
                    0.0
                });
                *entry += weight;
                // A member of the analogue's own owner, when the analogue lives elsewhere: the
                // target's owner's member of the same name plays the same part.
                let Some(owner) = analogue_owner.filter(|o| *o != target_owner) else { continue };
                let Some((dst_owner, member)) = e.dst.rsplit_once('.') else { continue };
                if dst_owner != owner {
                    continue;
                }
                let counterpart = format!("{target_owner}.{member}");
                if target.id.as_deref() != Some(counterpart.as_str()) && snapshot.contains_unit(&counterpart) {
                    *role.entry(counterpart).or_default() += weight;
                }
            }
        }
        AnalogueUsage { score, order, role }
    }

    pub(super) fn score(&self, id: &str) -> f64 {
        self.score.get(id).copied().unwrap_or(0.0)
    }

    pub(super) fn role_score(&self, id: &str) -> f64 {
        self.role.get(id).copied().unwrap_or(0.0)
    }
}

/// Whether two names are the same up to leading underscores (`send` and `send`, `_x` and `x`),
/// dunders left out (every class has an `__init__`).
pub(super) fn are_namesakes(a: &str, b: &str) -> bool {
    let is_dunder = |n: &str| n.len() > 4 && n.starts_with("__") && n.ends_with("__");
    let bare = a.trim_start_matches('_');
    !is_dunder(a) && !is_dunder(b) && !bare.is_empty() && bare == b.trim_start_matches('_')
}

/// Whether one name is built from the other's words (`der_decode` and `der_decode_partial`,
/// `remove_tags` and `tags`, `Guitar` and `guitar_range`): the words of one, split at
/// underscores and case folded, are all words of the other. A wrapper calls what it is named
/// after, and a method named for an attribute reads it. Namesakes ([`are_namesakes`]: the
/// same name up to leading underscores) and dunders are left out, and so are names of fewer
/// than four letters (`id`, `get`), which nest in too many others. The same words in another
/// case or with other underscores (`Tags` and `tags`, `type_` and `type`) count: on DevEval's
/// tuning half 4 of the 8 such candidates were needed, and leaving them out read 0.8010
/// against 0.8014.
pub(super) fn are_nested_names(a: &str, b: &str) -> bool {
    let is_dunder = |n: &str| n.len() > 4 && n.starts_with("__") && n.ends_with("__");
    let bare = |n: &str| n.trim_matches('_').to_lowercase();
    if is_dunder(a)
        || is_dunder(b)
        || bare(a).len() < 4
        || bare(b).len() < 4
        || a.trim_start_matches('_') == b.trim_start_matches('_')
    {
        return false;
    }
    let words =
        |n: &str| -> FxHashSet<String> { n.split('_').filter(|w| !w.is_empty()).map(str::to_lowercase).collect() };
    let (a, b) = (words(a), words(b));
    a.is_subset(&b) || b.is_subset(&a)
}

/// At most this many family members (and name siblings) are counted.
const FAMILY_MEMBERS: usize = 32;

/// The target's family: the functions and methods of the target's name in its file (a sibling
/// class's version, a sync and an async twin), the methods of that name of its class's bases,
/// transitively (the version an override extends), and of its class's direct subclasses (the
/// overrides extending it).
///
/// The other subclasses of the bases were family too, found through the edges into each base: on
/// django that cost 5.5 ms per target (hundreds of files import a base like `Field`), and on the
/// retrieval benchmark's trace Recall@10 read the same without them (0.692 either way).
pub(super) fn family_of(snapshot: &Snapshot, target: &Target) -> Vec<String> {
    let Some(name) = target_name(target) else { return Vec::new() };
    let inside_target = |id: &str| target.id.as_deref().is_some_and(|t| is_within(id, t));
    let mut family: Vec<String> = Vec::new();
    if let Some(file) = snapshot.file(&target.file) {
        family.extend(
            file.graph
                .units
                .iter()
                .filter(|u| matches!(u.kind, UnitKind::Function | UnitKind::Method) && !u.is_lambda())
                .filter(|u| last_name(&u.id) == name && !inside_target(&u.id))
                .map(|u| u.id.clone()),
        );
    }
    if let Some(class) = &target.class {
        for base in class_and_bases(snapshot, class).into_iter().skip(1) {
            let member = format!("{base}.{name}");
            if !family.contains(&member)
                && snapshot.unit(&member).is_some_and(|u| matches!(u.unit.kind, UnitKind::Function | UnitKind::Method))
            {
                family.push(member);
            }
        }
    }
    // The overrides in its class's direct subclasses (outside tests): what they add to the
    // target's version tells what it does too.
    if let Some(class) = &target.class {
        for (e, file) in snapshot.edges_to(class) {
            let member = format!("{}.{name}", e.src);
            if e.kind == EdgeKind::Inherits
                && !is_test_path(&file.graph.path)
                && !family.contains(&member)
                && snapshot.unit(&member).is_some_and(|u| matches!(u.unit.kind, UnitKind::Function | UnitKind::Method))
            {
                family.push(member);
            }
        }
    }
    family.truncate(FAMILY_MEMBERS);
    family
}

/// The target's name siblings: the functions or methods of its class (or module, for a function)
/// whose names have as many words as its name and differ from it in exactly one
/// (`_get_text_stdin` and `_get_text_stdout` for `_get_text_stderr`, `iter_text` for
/// `iter_bytes`): variants of one operation, written alike.
pub(super) fn name_siblings(snapshot: &Snapshot, target: &Target) -> Vec<String> {
    let Some(name) = target_name(target) else { return Vec::new() };
    fn words(n: &str) -> Vec<&str> {
        n.trim_matches('_').split('_').collect()
    }
    let target_words = words(name);
    if target_words.len() < 2 {
        return Vec::new();
    }
    let owner = target_owner(target);
    let Some(file) = snapshot.file(&target.file) else { return Vec::new() };
    let mut siblings: Vec<String> = file
        .graph
        .units
        .iter()
        .filter(|u| matches!(u.kind, UnitKind::Function | UnitKind::Method) && !u.is_lambda())
        .filter(|u| u.id.rsplit_once('.').is_some_and(|(o, _)| o == owner))
        .filter(|u| {
            let theirs = words(last_name(&u.id));
            theirs.len() == target_words.len() && theirs.iter().zip(&target_words).filter(|(a, b)| a != b).count() == 1
        })
        .map(|u| u.id.clone())
        .collect();
    siblings.truncate(FAMILY_MEMBERS);
    siblings
}

/// At most this many users of a class are read for [`TypeUsage`]: a class like django's `Model`
/// has thousands.
const TYPE_USERS: usize = 64;

/// What other code working with the classes the target's header names (its annotations) uses:
/// per used unit, the largest share, over those classes, of the functions and methods using the
/// class (in a signature or a body; at least two of them) that use it too. A function taking a
/// `Request` reads the members such functions read. Classes only its docstring names are left
/// out: on the retrieval benchmark they added nothing (Recall@10 0.7205 with the header's
/// classes, 0.7209 with both, offline), and on sympy, whose docstrings name core classes that
/// thousands of files refer to, reading their users cost a few milliseconds per target.
pub(super) struct TypeUsage {
    share: FxHashMap<String, f64>,
}

impl TypeUsage {
    pub(super) fn of(snapshot: &Snapshot, target: &Target, classes: &[String]) -> TypeUsage {
        let mut share: FxHashMap<String, f64> = FxHashMap::default();
        let inside_target = |id: &str| target.id.as_deref().is_some_and(|t| is_within(id, t));
        for class in classes {
            let mut users: Vec<&str> = Vec::new();
            for (e, _) in snapshot.edges_to_lazily(class) {
                if !matches!(e.kind, EdgeKind::Calls | EdgeKind::References) {
                    continue;
                }
                let user = without_lambdas(&e.src);
                if !inside_target(user)
                    && !users.contains(&user)
                    && matches!(snapshot.kind_of(user), Some(UnitKind::Function | UnitKind::Method))
                {
                    users.push(user);
                    if users.len() == TYPE_USERS {
                        break;
                    }
                }
            }
            if users.len() < 2 {
                continue;
            }
            let mut count: FxHashMap<&str, usize> = FxHashMap::default();
            for user in &users {
                let mut used: FxHashSet<&str> = FxHashSet::default();
                // Its own edges (not its lambdas'): an index lookup, where a scan of its file's
                // edges for the lambdas too cost a millisecond per django target.
                for (e, _) in snapshot.edges_from(user) {
                    if matches!(e.kind, EdgeKind::Calls | EdgeKind::References | EdgeKind::Inherits)
                        && *e.dst != **class
                    {
                        used.insert(&*e.dst);
                    }
                }
                for id in used {
                    *count.entry(id).or_default() += 1;
                }
            }
            for (id, n) in count {
                if inside_target(id) {
                    continue;
                }
                let s = n as f64 / users.len() as f64;
                let entry = share.entry(id.to_string()).or_default();
                *entry = entry.max(s);
            }
        }
        TypeUsage { share }
    }

    pub(super) fn share(&self, id: &str) -> f64 {
        self.share.get(id).copied().unwrap_or(0.0)
    }
}

/// What a group of the target's relatives uses in their bodies (its family, its name siblings):
/// per used unit, the share of the group that calls, reads or inherits it. A member's use of its
/// own class (`Sibling.release` in `Sibling.close`) also stands for the target's class's member
/// of that name (`Sub.release`), as for analogues.
pub(super) struct UseShare {
    share: FxHashMap<String, f64>,
}

impl UseShare {
    pub(super) fn of(snapshot: &Snapshot, target: &Target, members: &[String]) -> UseShare {
        let mut share: FxHashMap<String, f64> = FxHashMap::default();
        if members.is_empty() {
            return UseShare { share };
        }
        let inside_target = |id: &str| target.id.as_deref().is_some_and(|t| is_within(id, t));
        let target_owner = target_owner(target);
        let each = 1.0 / members.len() as f64;
        for member in members {
            let member_owner = owner_of(member);
            let mut used: FxHashSet<String> = FxHashSet::default();
            for e in body_edges(snapshot, member) {
                if !matches!(e.kind, EdgeKind::Calls | EdgeKind::References | EdgeKind::Inherits) {
                    continue;
                }
                used.insert(e.dst.to_string());
                let Some(owner) = member_owner.filter(|o| *o != target_owner) else { continue };
                if let Some((dst_owner, used_member)) = e.dst.rsplit_once('.')
                    && dst_owner == owner
                {
                    let counterpart = format!("{target_owner}.{used_member}");
                    if snapshot.contains_unit(&counterpart) {
                        used.insert(counterpart);
                    }
                }
            }
            for id in used {
                if !inside_target(&id) {
                    *share.entry(id).or_default() += each;
                }
            }
        }
        UseShare { share }
    }

    pub(super) fn share(&self, id: &str) -> f64 {
        self.share.get(id).copied().unwrap_or(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namesakes_are_equal_up_to_leading_underscores_and_never_dunders() {
        assert!(are_namesakes("send", "send"));
        assert!(are_namesakes("_get_renderable", "get_renderable"));
        assert!(are_namesakes("x", "__x"));
        assert!(!are_namesakes("__init__", "__init__"));
        assert!(!are_namesakes("__init__", "init"));
        assert!(!are_namesakes("send", "sender"));
        assert!(!are_namesakes("_", ""));
    }

    #[test]
    fn nested_names_are_built_from_each_others_words() {
        assert!(are_nested_names("der_decode", "der_decode_partial"));
        assert!(are_nested_names("tags", "remove_tags"));
        assert!(are_nested_names("_parse_value", "value"));
        assert!(are_nested_names("Guitar", "guitar_range"));
        // Namesakes are another feature's; dunders and short names nest in too much.
        assert!(!are_nested_names("send", "_send"));
        assert!(!are_nested_names("__init__", "init_cache"));
        assert!(!are_nested_names("id", "user_id"));
        // Words, not letters: `tag` is no word of `tags_of`.
        assert!(!are_nested_names("tags_of", "tag"));
        assert!(!are_nested_names("remove_tags", "add_tags"));
        // Another spelling of the same words is no namesake.
        assert!(are_nested_names("Tags", "tags"));
        assert!(are_nested_names("type_", "type"));
    }
}
