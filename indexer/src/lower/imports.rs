//! Import statements: the names `import` and `from ... import` bind.

use super::*;

impl<'a> Lowerer<'a> {
    /// A name clause of an import statement (`a.b` or `a.b as c`): the dotted name, normalised,
    /// and the alias if any.
    pub(super) fn imported_name(&self, n: Node) -> (String, Option<&'a str>) {
        match n.kind_str() {
            "aliased_import" => (
                n.field("name").map(|x| self.dotted_text(x)).unwrap_or_default(),
                n.field("alias").map(|x| self.text(x)),
            ),
            _ => (self.dotted_text(n), None),
        }
    }

    pub(super) fn import(&mut self, node: Node, scope: ScopeId) {
        let mut cursor = node.walk();
        let names: Vec<Node> = node.children_by_field_name("name", &mut cursor).collect();
        for n in names {
            let (module, alias) = self.imported_name(n);
            if module.is_empty() {
                continue;
            }
            match alias {
                Some(alias) => self.bind(
                    scope,
                    alias,
                    Binding::Import(Import::Module { module: ModuleRef { level: 0, name: Name::new(&module) } }),
                ),
                None => {
                    let first = Name::new(module.split('.').next().unwrap_or(&module));
                    self.scope(scope).push_binding(
                        first.clone(),
                        Binding::Import(Import::Module { module: ModuleRef { level: 0, name: first.clone() } }),
                    );
                    self.module_binds(scope, &first);
                }
            }
            self.import_replaces_earlier(node, scope);
            self.scope(scope).imports.push(ImportStmt {
                line: line(node),
                module: ModuleRef { level: 0, name: Name::new(&module) },
                names: Box::default(),
                is_from: false,
            });
        }
    }

    pub(super) fn import_from(&mut self, node: Node, scope: ScopeId) {
        let Some(module_node) = node.field("module_name") else {
            return;
        };
        let module = if module_node.kind_str() == "relative_import" {
            let mut level = 0;
            let mut name = String::new();
            let mut cursor = module_node.walk();
            for child in module_node.named_children(&mut cursor) {
                match child.kind_str() {
                    "import_prefix" => level = self.text(child).chars().filter(|&c| c == '.').count() as u32,
                    "dotted_name" => name = self.dotted_text(child),
                    _ => {}
                }
            }
            ModuleRef { level, name: Name::new(&name) }
        } else {
            ModuleRef { level: 0, name: Name::new(&self.dotted_text(module_node)) }
        };
        // `from __ｆｕｔｕｒｅ__ import ...` is a future statement to Python, which reads the name
        // normalised; tree-sitter knows only the ASCII spelling as one (and binds nothing for it).
        if module.level == 0 && module.name.as_str() == "__future__" {
            return;
        }
        let mut names = Vec::new();
        let mut cursor = node.walk();
        let name_nodes: Vec<Node> = node.children_by_field_name("name", &mut cursor).collect();
        for n in name_nodes {
            let (name, alias) = self.imported_name(n);
            if name.is_empty() {
                continue;
            }
            let name = Name::new(&name);
            let local = alias.map(Name::new).unwrap_or_else(|| name.clone());
            self.module_binds(scope, &local);
            self.scope(scope)
                .push_binding(local, Binding::Import(Import::Name { module: module.clone(), name: name.clone() }));
            self.import_replaces_earlier(node, scope);
            names.push(name);
        }
        let mut cursor = node.walk();
        if node.named_children(&mut cursor).any(|c| c.kind_str() == "wildcard_import") {
            names.push(Name::new("*"));
        }
        let names = names.into_boxed_slice();
        self.scope(scope).imports.push(ImportStmt { line: line(node), module, names, is_from: true });
    }
}
