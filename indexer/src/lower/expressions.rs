//! Expressions: reads and writes of names and attributes, call chains, constants, values
//! (containers, comprehensions, lambdas), and `match` patterns.

use super::*;

/// The largest expression (in [`parts`], which counts up to 64) whose special methods are
/// recorded as called on it: a subscripted, tested or operated-on object is a name or a short
/// chain in real code.
const MAX_OBJECT_SIZE: usize = 24;

impl<'a> Lowerer<'a> {
    pub(super) fn access(&mut self, scope: ScopeId, expr: Expr, line: u32, kind: AccessKind) {
        self.scope(scope).accesses.push(Access { expr, line, kind });
    }

    /// Records that `object`'s class has a special method called at `line` (see
    /// [`ImplicitCall`]); an object that cannot be an instance is left out.
    pub(super) fn implicit_call(&mut self, scope: ScopeId, object: &Expr, line: u32, call: ImplicitCall) {
        // Each level of `t[0][1]...[n]` is a subscript of the one before: copying every level
        // whole would take memory quadratic in the chain (190 levels took 1.9 GB).
        if is_flow_worthy(object) && !matches!(object, Expr::Constant(_)) && parts(object, 0) <= MAX_OBJECT_SIZE {
            self.scope(scope).implicit_calls.push((object.clone(), line, call));
        }
    }

    /// Records that `object` is iterated at `line` (`a, b = obj`, `[*obj]`, `f(*obj)`, `yield
    /// from obj`): its class's `__iter__` and the iterator's `__next__` run there, as for `for`.
    #[inline(never)]
    pub(super) fn iterated(&mut self, scope: ScopeId, object: &Expr, line: u32) {
        if is_flow_worthy(object) && !matches!(object, Expr::Constant(_)) && parts(object, 0) <= MAX_OBJECT_SIZE {
            self.scope(scope).iterations.push((object.clone(), line, false));
        }
    }

    /// `del obj[k]`: `obj` and the key are read, and `obj`'s `__delitem__` is called (not its
    /// `__getitem__`).
    pub(super) fn deleted_item(&mut self, node: Node, scope: ScopeId) {
        let object = node.field("value").map(|v| self.expr(v, scope));
        let mut cursor = node.walk();
        let subs: Vec<Node> = node.children_by_field_name("subscript", &mut cursor).collect();
        for s in subs {
            self.expr(s, scope);
        }
        if let Some(object) = object {
            self.implicit_call(scope, &object, line(node), ImplicitCall::DelItem);
        }
    }

    /// `del obj.attr`: `obj` is read, and the attribute deleted (see [`AccessKind::Delete`]).
    pub(super) fn deleted_attribute(&mut self, node: Node, scope: ScopeId) {
        let chain = self.chain(node, scope);
        self.access(scope, chain, line(node), AccessKind::Delete);
    }

    /// Lowers an expression that is read: names and attribute chains are recorded as accesses.
    pub(super) fn expr(&mut self, node: Node, scope: ScopeId) -> Expr {
        match node.kind_str() {
            "identifier" | "attribute" => {
                let e = self.chain(node, scope);
                self.access(scope, e.clone(), line(node), AccessKind::Read);
                self.narrowed_read(node, scope, e)
            }
            _ => self.value(node, scope),
        }
    }

    /// Lowers a name or attribute chain without recording the chain itself as an access (the
    /// caller records it as a call, a base class, a store target, ...).
    pub(super) fn chain(&mut self, node: Node, scope: ScopeId) -> Expr {
        match node.kind_str() {
            "identifier" => Expr::Name(Name::new(self.text(node))),
            "attribute" => self.nested(Expr::Unknown, |l| l.attribute_chain(node, scope)),
            _ => self.value(node, scope),
        }
    }

    pub(super) fn attribute_chain(&mut self, node: Node, scope: ScopeId) -> Expr {
        match node.kind_str() {
            "attribute" => {
                let object = node.field("object");
                let attr = node.field("attribute").map(|a| Name::new(self.text(a)));
                match (object, attr) {
                    (Some(object), Some(attr)) => {
                        let object = match self.narrowed_object(object, scope) {
                            Some(narrowed) => narrowed,
                            None => self.chain(object, scope),
                        };
                        Expr::Attr(Box::new(object), attr)
                    }
                    _ => Expr::Unknown,
                }
            }
            _ => self.value(node, scope),
        }
    }

    pub(super) fn chain_or_value(&mut self, node: Node, scope: ScopeId) -> Expr {
        self.chain(node, scope)
    }

    /// A constant dict key: a plain string literal as its text, an integer literal as its value
    /// marked apart (`1` and `0x1` are one key, `"1"` another).
    pub(super) fn constant_key(&self, node: Node) -> Option<Name> {
        if node.kind_str() != "integer" {
            return self.constant_string(node);
        }
        let digits = self.text(node).replace('_', "");
        let lower = digits.to_ascii_lowercase();
        let value = if let Some(hex) = lower.strip_prefix("0x") {
            i128::from_str_radix(hex, 16)
        } else if let Some(oct) = lower.strip_prefix("0o") {
            i128::from_str_radix(oct, 8)
        } else if let Some(bin) = lower.strip_prefix("0b") {
            i128::from_str_radix(bin, 2)
        } else {
            lower.parse::<i128>()
        };
        value.ok().map(|v| Name::new(&format!("{INTEGER_KEY}{v}")))
    }

    /// The value of a plain string literal (no interpolation, no concatenation).
    pub(super) fn constant_string(&self, node: Node) -> Option<Name> {
        if node.kind_str() != "string" {
            return None;
        }
        let mut cursor = node.walk();
        if node
            .named_children(&mut cursor)
            .any(|c| c.kind_str() == "interpolation" || c.kind_str() == "escape_sequence")
        {
            return None;
        }
        let text = self.text(node);
        let body = text.trim_start_matches(|c: char| c.is_ascii_alphabetic());
        ["\"\"\"", "'''", "\"", "'"]
            .iter()
            .find_map(|q| body.strip_prefix(q).and_then(|b| b.strip_suffix(q)))
            .map(Name::new)
    }

    pub(super) fn value(&mut self, node: Node, scope: ScopeId) -> Expr {
        self.nested(Expr::Unknown, |l| l.value_inner(node, scope))
    }

    /// Runs `lower` one level deeper, or, past [`MAX_NESTING`] levels, counts the cut and gives
    /// `cut` instead. Every recursion of lowering goes through here (expressions, attribute
    /// chains, chained assignments, nested targets, statements), so that no file can exhaust the
    /// stack: tree-sitter parses any depth, and a file of 10,000 chained assignment targets or
    /// attribute links (`v0 = v1 = ... = 1`) used to overflow it and kill the process.
    pub(super) fn nested<R>(&mut self, cut: R, lower: impl FnOnce(&mut Self) -> R) -> R {
        if self.nesting >= MAX_NESTING {
            self.too_deep += 1;
            self.refusal(self.statement_start, "nested too deeply to index");
            return cut;
        }
        self.nesting += 1;
        let lowered = lower(self);
        self.nesting -= 1;
        lowered
    }

    pub(super) fn value_inner(&mut self, node: Node, scope: ScopeId) -> Expr {
        match node.kind_str() {
            "identifier" | "attribute" => self.expr(node, scope),
            "call" => {
                let callee_node = node.field("function");
                let callee = callee_node.map(|f| self.chain(f, scope)).unwrap_or(Expr::Unknown);
                let callee_span = callee_node.map(span).unwrap_or((0, 0));
                let arguments = self.call_arguments(node, scope);
                self.finish_call(node, callee, callee_span, arguments, scope)
            }
            "subscript" => {
                let value = node.field("value").map(|v| self.expr(v, scope));
                if let Some(v) = &value {
                    // A slice too: `seq[a:b]` passes a `slice` to `__getitem__`.
                    self.implicit_call(scope, v, line(node), ImplicitCall::GetItem);
                }
                let mut cursor = node.walk();
                let subs: Vec<Node> = node.children_by_field_name("subscript", &mut cursor).collect();
                // `seq[a:b]`: a slice (see `Expr::Slice`).
                let slice_start = match subs.as_slice() {
                    [only] if only.kind_str() == "slice" => Some(self.slice_start(*only)),
                    _ => None,
                };
                for &s in &subs {
                    self.expr(s, scope);
                }
                match (value, slice_start) {
                    (Some(v), Some(start)) => Expr::Slice(Box::new(v), start),
                    (Some(v), None) => self.item_of(v, &subs),
                    (None, _) => Expr::Unknown,
                }
            }
            "parenthesized_expression" => match node.named_child(0) {
                Some(inner) => self.expr(inner, scope),
                None => Expr::Unknown,
            },
            // `[*items]`, `f(*items)`: `items` is iterated. (The starred value has no position:
            // what follows it in a literal is at no known index.)
            "list_splat" => {
                if let Some(inner) = node.named_child(0) {
                    let items = self.expr(inner, scope);
                    // The call or display iterates it where it starts. A set display copies a
                    // set (of a subclass too) without iterating it: not recorded there.
                    let holder = node.parent().map(|p| match p.kind_str() {
                        "argument_list" => p.parent().unwrap_or(p),
                        _ => p,
                    });
                    if holder.is_none_or(|h| h.kind_str() != "set") {
                        self.iterated(scope, &items, line(holder.unwrap_or(node)));
                    }
                }
                Expr::Unknown
            }
            "list" | "tuple" | "set" | "expression_list" | "pattern_list" => {
                let kind = match node.kind_str() {
                    "list" => ContainerKind::List,
                    "set" => ContainerKind::Set,
                    _ => ContainerKind::Tuple,
                };
                let mut cursor = node.walk();
                let children: Vec<Node> = node.named_children(&mut cursor).collect();
                let elements =
                    children.into_iter().filter(|c| c.kind_str() != "comment").map(|c| self.expr(c, scope)).collect();
                Expr::Container(kind, elements)
            }
            "dictionary" => {
                let mut cursor = node.walk();
                let children: Vec<Node> = node.named_children(&mut cursor).collect();
                let mut values = Vec::new();
                let mut keyed = Vec::new();
                let mut all_constant = true;
                for child in children {
                    if child.kind_str() == "pair" {
                        let key = child.field("key").and_then(|k| self.constant_key(k));
                        if let Some(k) = child.field("key") {
                            self.expr(k, scope);
                        }
                        if let Some(v) = child.field("value") {
                            let value = self.expr(v, scope);
                            match key {
                                Some(key) => keyed.push((key, value.clone())),
                                None => all_constant = false,
                            }
                            values.push(value);
                        }
                    } else if child.kind_str() != "comment" {
                        all_constant = false;
                        self.expr(child, scope);
                    }
                }
                if all_constant && !keyed.is_empty() {
                    Expr::Keyed(keyed)
                } else {
                    Expr::Container(ContainerKind::Dict, values)
                }
            }
            "lambda" => {
                let parent = self.owner_def(scope);
                let header_end = node
                    .field("parameters")
                    .map_or(node.start_byte() + "lambda".len(), |p| p.end_byte())
                    .min(node.end_byte());
                self.defs.push(Def {
                    kind: DefKind::Lambda,
                    // Named once all lambdas are known (`name_lambdas`).
                    name: Name::new("<lambda>"),
                    path: Name::new("<lambda>"),
                    parent,
                    body: None,
                    start_line: node.start_position().row as u32 + 1,
                    end_line: node.end_position().row as u32 + 1,
                    start_byte: node.start_byte() as u32,
                    end_byte: node.end_byte() as u32,
                    header: Some((node.start_byte() as u32, header_end as u32)),
                    docstring: None,
                    decorators: Box::default(),
                    return_type: None,
                    conditional: self.conditional_depth > 0,
                });
                let def = (self.defs.len() - 1) as DefId;
                let inner = self.new_scope(ScopeKind::Anonymous, scope, Some(def));
                self.defs[def as usize].body = Some(inner);
                if let Some(params) = node.field("parameters") {
                    self.parameters(params, scope, inner);
                }
                if let Some(body) = node.field("body") {
                    let ret = self.expr(body, inner);
                    self.scope(inner).returns.push(ret);
                }
                Expr::Lambda(inner)
            }
            "conditional_expression" => {
                let mut cursor = node.walk();
                // (A comment is a named child too: `a  # why` then `if c else b`.)
                let children: Vec<Node> =
                    node.named_children(&mut cursor).filter(|c| c.kind_str() != "comment").collect();
                let mut options = Vec::new();
                for (i, child) in children.into_iter().enumerate() {
                    let e = self.expr(child, scope);
                    if i != 1 {
                        options.push(e);
                    } else {
                        self.truth_test(scope, child, &e);
                    }
                }
                Expr::Union(options)
            }
            // Chains of one operator are nested one level per operator, leftmost deepest:
            // walked down their left spine, not recursively (generated code has thousands).
            "boolean_operator" | "binary_operator" => {
                let kind = node.kind_str();
                let mut operands = Vec::new();
                // Each operator's node, from the last: its method and line are read below.
                let mut operators = Vec::new();
                let mut all_plus = true;
                let mut current = Some(node);
                while let Some(n) = current {
                    if n.kind_str() != kind {
                        operands.push(n);
                        break;
                    }
                    all_plus &= n.field("operator").is_some_and(|o| o.kind_str() == "+");
                    operators.push(n.field("operator"));
                    operands.extend(n.field("right"));
                    current = n.field("left");
                }
                operands.reverse();
                if kind == "boolean_operator" {
                    return self.boolean_operands(operands, scope);
                }
                let values: Vec<Expr> = operands.into_iter().map(|n| self.expr(n, scope)).collect();
                operators.reverse();
                self.binary_operators(scope, &values, &operators);
                // `steps + [f]`: with a literal list or tuple among the operands, `+` joins
                // sequences; the result has every operand's elements. Otherwise `a + b` is a new
                // value of unknown type (a number, a string, ...).
                let joined = values.iter().find_map(|v| match v {
                    Expr::Container(kind @ (ContainerKind::List | ContainerKind::Tuple), _) => Some(*kind),
                    _ => None,
                });
                match joined {
                    Some(kind) if all_plus => {
                        Expr::Container(kind, values.into_iter().map(|v| Expr::Subscript(Box::new(v))).collect())
                    }
                    _ => Expr::Unknown,
                }
            }
            "await" => match node.named_child(0) {
                Some(inner) => self.expr(inner, scope),
                None => Expr::Unknown,
            },
            "string" | "concatenated_string" => {
                self.walk_children(node, scope);
                let text = self.text(node);
                let prefix: String = text.chars().take_while(|c| c.is_ascii_alphabetic()).collect();
                if text.starts_with('`') {
                    self.refuse_python2(node, "Python 2 backquotes");
                } else if prefix.to_ascii_lowercase().contains("ur") {
                    self.refuse_python2(node, "a Python 2 `ur` string prefix");
                }
                if prefix.contains(['b', 'B']) {
                    Expr::Literal("bytes")
                } else {
                    self.constant_key(node).map(Expr::Constant).unwrap_or(Expr::Literal("str"))
                }
            }
            "integer" => {
                let text = self.text(node);
                if text.ends_with(['l', 'L']) {
                    self.refuse_python2(node, "a Python 2 long integer (`10L`)");
                } else if text.ends_with(['j', 'J']) {
                    // An imaginary literal (`0777j` is Python 3): a complex number.
                    return Expr::Literal("complex");
                } else if text.len() > 1
                    && text.starts_with('0')
                    && text[1..].trim_start_matches('_').starts_with(|c: char| c.is_ascii_digit())
                {
                    // `00` and `0_0` are zero; `0777`, `0_7` and `09` are Python 2 octal (or no
                    // number at all).
                    if text.bytes().any(|b| b != b'0' && b != b'_') {
                        self.refuse_python2(node, "a Python 2 octal integer (`0777`)");
                    }
                }
                self.constant_key(node).map(Expr::Constant).unwrap_or(Expr::Literal("int"))
            }
            "float" if self.text(node).ends_with(['j', 'J']) => Expr::Literal("complex"),
            "float" => Expr::Literal("float"),
            "true" | "false" => Expr::Literal("bool"),
            "none" => Expr::Literal("NoneType"),
            "list_comprehension" | "set_comprehension" | "dictionary_comprehension" | "generator_expression" => {
                self.comprehension(node, scope)
            }
            "named_expression" => {
                let value = node.field("value").map(|v| self.expr(v, scope)).unwrap_or(Expr::Unknown);
                if let Some(name) = node.field("name") {
                    // `:=` in a comprehension binds in the scope around it (PEP 572); at module
                    // or class level it defines a variable unit like any assignment.
                    let mut target_scope = scope;
                    while self.scopes[target_scope as usize].kind == ScopeKind::Anonymous
                        && self.scopes[target_scope as usize].def.is_none()
                    {
                        match self.scopes[target_scope as usize].parent {
                            Some(p) => target_scope = p,
                            None => break,
                        }
                    }
                    // What the value reads through the comprehension's own names means nothing
                    // outside it.
                    let bound_inside = |n: &str| {
                        let mut s = scope;
                        while s != target_scope {
                            if self.scopes[s as usize].binds(n) {
                                return true;
                            }
                            match self.scopes[s as usize].parent {
                                Some(p) => s = p,
                                None => break,
                            }
                        }
                        false
                    };
                    let kept = if target_scope != scope && mentions_name(&value, &bound_inside) {
                        Expr::Unknown
                    } else {
                        value.clone()
                    };
                    self.bind_target(name, Binding::Value(kept), target_scope, Some(node));
                }
                value
            }
            "yield" => {
                let values = self.named_exprs(node, scope);
                let is_from = {
                    let mut cursor = node.walk();
                    node.children(&mut cursor).any(|c| c.kind_str() == "from")
                };
                for v in values {
                    if is_from {
                        self.iterated(scope, &v, line(node));
                    }
                    let v = if is_from { Expr::Subscript(Box::new(v)) } else { v };
                    self.scope(scope).yields.push(v);
                }
                Expr::Unknown
            }
            "interpolation" => {
                self.walk_children(node, scope);
                Expr::Unknown
            }
            "comparison_operator" => {
                self.comparison(node, scope);
                Expr::Unknown
            }
            "unary_operator" => self.unary(node, scope),
            "not_operator" => self.not_operator(node, scope),
            _ => {
                self.walk_children(node, scope);
                Expr::Unknown
            }
        }
    }

    /// The item `object[subs]` (the subscript's keys, already lowered) reads: under a constant
    /// key (`Item`), under a name (`ItemAt`), or under a key nothing knows, neither a constant
    /// nor a name (`t[i + 1]`, `t[h.k]`, `t[i, j]`). Not `Subscript`, which stands for an
    /// element of what iterating gives (`for a, b in x`, `*rest`, `yield from`).
    #[inline(never)]
    pub(super) fn item_of(&self, object: Expr, subs: &[Node]) -> Expr {
        let object = Box::new(object);
        let [only] = subs else { return Expr::ItemAt(object, Box::new(Expr::Unknown)) };
        match self.constant_key(*only) {
            Some(key) => Expr::Item(object, key),
            None if only.kind_str() == "identifier" => {
                Expr::ItemAt(object, Box::new(Expr::Name(Name::new(self.text(*only)))))
            }
            None => Expr::ItemAt(object, Box::new(Expr::Unknown)),
        }
    }

    /// `a and b or c`: one of the operands, each but the last tested for truth on the way.
    #[inline(never)]
    fn boolean_operands(&mut self, operands: Vec<Node>, scope: ScopeId) -> Expr {
        let last = operands.len().saturating_sub(1);
        let mut values = Vec::with_capacity(operands.len());
        for (i, operand) in operands.into_iter().enumerate() {
            let value = self.expr(operand, scope);
            if i < last {
                self.truth_test(scope, operand, &value);
            }
            values.push(value);
        }
        Expr::Union(values)
    }

    /// `not x`: `x` tested for truth; a `bool`.
    #[inline(never)]
    fn not_operator(&mut self, node: Node, scope: ScopeId) -> Expr {
        let Some(argument) = node.field("argument") else {
            self.walk_children(node, scope);
            return Expr::Literal("bool");
        };
        let value = self.expr(argument, scope);
        self.truth_test(scope, argument, &value);
        Expr::Literal("bool")
    }

    /// A condition (`if`, `elif`, `while`, `assert`, a comprehension's `if`, a `case` guard):
    /// lowered, and tested for truth.
    pub(super) fn condition(&mut self, node: Node, scope: ScopeId) {
        let value = self.expr(node, scope);
        self.truth_test(scope, node, &value);
    }

    /// Records that the value `value` of `node` is tested for truth. Not for `await x`, whose
    /// value is lowered as `x` itself (what the awaitable gives is not evaluated).
    fn truth_test(&mut self, scope: ScopeId, node: Node, value: &Expr) {
        let mut inner = node;
        while inner.kind_str() == "parenthesized_expression"
            && let Some(child) = inner.named_child(0)
        {
            inner = child;
        }
        if inner.kind_str() != "await" {
            self.implicit_call(scope, value, line(node), ImplicitCall::Truth);
        }
    }

    /// A `case` pattern: names it captures are bound (`case [x, *rest]`, `case {"k": v}`,
    /// `case Point() as p`: `p` is a `Point`), dotted names are values it reads (`case
    /// Color.RED`), and a class pattern's class is read (`case Point(x=0)`).
    pub(super) fn pattern(&mut self, node: Node, scope: ScopeId) {
        // Patterns nest without bound in tree-sitter (`case C(C(C(...)))`): bounded like every
        // other recursion of lowering.
        self.nested((), |l| l.pattern_inner(node, scope));
    }

    fn pattern_inner(&mut self, node: Node, scope: ScopeId) {
        match node.kind_str() {
            "dotted_name" => {
                let chain = self.dotted(node);
                match &chain {
                    Expr::Name(n) if n == "_" => {}
                    Expr::Name(n) => {
                        let name = n.to_string();
                        self.bind(scope, &name, Binding::Value(Expr::Unknown));
                    }
                    _ => self.access(scope, chain, line(node), AccessKind::Read),
                }
            }
            "class_pattern" => {
                let mut cursor = node.walk();
                let children: Vec<Node> = node.named_children(&mut cursor).collect();
                for (i, child) in children.into_iter().enumerate() {
                    if i == 0 && child.kind_str() == "dotted_name" {
                        let class = self.dotted(child);
                        self.access(scope, class, line(child), AccessKind::Read);
                    } else {
                        self.pattern(child, scope);
                    }
                }
            }
            "as_pattern" => {
                let mut cursor = node.walk();
                let children: Vec<Node> = node.named_children(&mut cursor).collect();
                let mut value = Expr::Unknown;
                for child in children {
                    if matches!(child.kind_str(), "identifier" | "as_pattern_target") {
                        let alias = child.named_child(0).filter(|c| c.kind_str() == "identifier").unwrap_or(child);
                        let name = self.text(alias).to_string();
                        self.bind(scope, &name, Binding::Value(value.clone()));
                    } else {
                        // `case Point() as p`: `p` is an instance of the class matched.
                        value = match child.kind_str() {
                            "case_pattern" => child
                                .named_child(0)
                                .filter(|c| c.kind_str() == "class_pattern")
                                .and_then(|c| c.named_child(0))
                                .filter(|c| c.kind_str() == "dotted_name")
                                .map(|c| Expr::Instance(Box::new(self.dotted(c))))
                                .unwrap_or(Expr::Unknown),
                            _ => Expr::Unknown,
                        };
                        self.pattern(child, scope);
                    }
                }
            }
            "splat_pattern" => {
                if let Some(name) = node.named_child(0).filter(|c| c.kind_str() == "identifier") {
                    let name = self.text(name).to_string();
                    if name != "_" {
                        self.bind(scope, &name, Binding::Value(Expr::Unknown));
                    }
                }
            }
            // `Point(x=px)`: the keyword names an attribute, the pattern after it may capture.
            "keyword_pattern" => {
                let mut cursor = node.walk();
                let children: Vec<Node> = node.named_children(&mut cursor).collect();
                for child in children.into_iter().skip(1) {
                    self.pattern(child, scope);
                }
            }
            "case_pattern" | "list_pattern" | "tuple_pattern" | "union_pattern" | "dict_pattern" => {
                let mut cursor = node.walk();
                let children: Vec<Node> = node.named_children(&mut cursor).collect();
                for child in children {
                    self.pattern(child, scope);
                }
            }
            // Literals, `None`, strings: nothing to bind or read.
            _ => {}
        }
    }

    /// A `def` or `class` without a statement in its body (`def a():` followed by `def b():`
    /// at the same indentation, half-typed): Python rejects it, tree-sitter accepts it without an
    /// error node. It counts as a parse error of the file.
    pub(super) fn check_body(&mut self, definition: Node, body: Option<Node>) {
        // Already counted by tree-sitter's own error and missing nodes.
        if definition.has_error() {
            return;
        }
        let has_statement = body.is_some_and(|b| {
            let mut cursor = b.walk();

            b.named_children(&mut cursor).any(|c| c.kind_str() != "comment")
        });
        if !has_statement {
            self.empty_bodies += 1;
            if !self.repaired {
                self.refusal(definition.start_byte(), "a block with no statement");
            }
        }
    }

    /// `a.b.c` written as a `dotted_name` node, as the attribute chain it reads.
    pub(super) fn dotted(&self, node: Node) -> Expr {
        let mut cursor = node.walk();
        let mut chain: Option<Expr> = None;
        for part in node.named_children(&mut cursor).filter(|c| c.kind_str() == "identifier") {
            let name = Name::new(self.text(part));
            chain = Some(match chain {
                None => Expr::Name(name),
                Some(base) => Expr::Attr(Box::new(base), name),
            });
        }
        chain.unwrap_or(Expr::Unknown)
    }

    pub(super) fn walk_children(&mut self, node: Node, scope: ScopeId) {
        let mut cursor = node.walk();
        let children: Vec<Node> = node.named_children(&mut cursor).collect();
        for child in children {
            match child.kind_str() {
                "comment" | "string_start" | "string_content" | "string_end" | "escape_sequence" => {}
                kind if is_statement_like(kind) => self.statement(child, scope),
                _ => {
                    self.expr(child, scope);
                }
            }
        }
    }

    /// A call's arguments (see [`CallArguments`]), lowered. Apart from [`Lowerer::value`], whose
    /// frame is on the stack once per level of nesting.
    #[inline(never)]
    fn call_arguments(&mut self, node: Node, scope: ScopeId) -> CallArguments {
        let mut args = Vec::new();
        let mut keywords = Vec::new();
        // Positional and keyword arguments as written; `None` once one is a splat.
        let mut written = Some((0u16, 0u16));
        if let Some(arguments) = node.field("arguments") {
            if arguments.kind_str() == "generator_expression" {
                args.push(flow_only(self.value(arguments, scope)));
                written = Some((1, 0));
            } else {
                args.reserve_exact(arguments.named_child_count());
                let mut cursor = arguments.walk();
                let children: Vec<Node> = arguments.named_children(&mut cursor).collect();
                // After `*rest` the positions of later arguments are unknown.
                let mut positions_known = true;
                for arg in children {
                    match arg.kind_str() {
                        "keyword_argument" => {
                            written = written.map(|(p, k)| (p, k.saturating_add(1)));
                            let name = arg.field("name").map(|n| Name::new(self.text(n)));
                            let value = arg.field("value").map(|v| self.expr(v, scope));
                            if let (Some(name), Some(value)) = (name, value) {
                                // Only what can carry a callable or an instance flows.
                                if is_flow_worthy(&value) {
                                    keywords.push((name, value));
                                }
                            }
                        }
                        "comment" => {}
                        "list_splat" | "dictionary_splat" => {
                            // Read (the names in it are used), but it has no position:
                            // `f(*pre, cb)` does not pass `cb` second, nor `f(**kw)` first.
                            self.expr(arg, scope);
                            positions_known &= arg.kind_str() == "dictionary_splat";
                            written = None;
                        }
                        _ => {
                            written = written.map(|(p, k)| (p.saturating_add(1), k));
                            let value = self.expr(arg, scope);
                            if positions_known {
                                args.push(flow_only(value));
                            }
                        }
                    }
                }
            }
        }
        CallArguments { args, keywords, written }
    }

    /// A comparison: its operands are read, and `x in obj` and `x not in obj` call `obj`'s
    /// `__contains__` (the operand after the operator; comparisons chain: `a < b in c`). Apart
    /// from [`Lowerer::value`], whose frame is on the stack once per level of nesting.
    #[inline(never)]
    fn comparison(&mut self, node: Node, scope: ScopeId) {
        if node.children(&mut node.walk()).any(|c| c.kind_str() == "<>") {
            self.refuse_python2(node, "the Python 2 operator `<>`");
        }
        let mut cursor = node.walk();
        let children: Vec<Node> = node.children(&mut cursor).collect();
        // The operand before the operator being read, and that operator.
        let mut previous: Option<Expr> = None;
        let mut operator: Option<Node> = None;
        for child in children {
            if !child.is_named() {
                operator = Some(child);
                continue;
            }
            match child.kind_str() {
                "comment" => continue,
                kind if is_statement_like(kind) => {
                    self.statement(child, scope);
                    (previous, operator) = (None, None);
                    continue;
                }
                _ => {}
            }
            let operand = self.expr(child, scope);
            if let Some(op) = operator.take() {
                match op.kind_str() {
                    "in" | "not in" => self.implicit_call(scope, &operand, line(child), ImplicitCall::Contains),
                    kind => {
                        if let (Some(method), Some(left)) = (binary_operator_method(kind), &previous) {
                            self.operator_use(scope, left.clone(), operand.clone(), line(op), method);
                        }
                    }
                }
            }
            previous = Some(operand);
        }
    }

    /// `a + b - c`: the operators of a chain of one kind, `values` its operands in order and
    /// `operators` the operator nodes between them.
    #[inline(never)]
    fn binary_operators(&mut self, scope: ScopeId, values: &[Expr], operators: &[Option<Node>]) {
        for (i, op) in operators.iter().enumerate() {
            let Some(op) = op else { continue };
            let Some(method) = binary_operator_method(op.kind_str()) else { continue };
            // The left operand of all but the first is the result of the one before.
            let left = if i == 0 { values.first().cloned().unwrap_or(Expr::Unknown) } else { Expr::Unknown };
            let right = values.get(i + 1).cloned().unwrap_or(Expr::Unknown);
            self.operator_use(scope, left, right, line(*op), method);
        }
    }

    /// `-a`, `+a`, `~a`: the operand is read and its class's `__neg__`, `__pos__` or
    /// `__invert__` called. A signed number literal (`-1`, `+2.5`, `-1j`) is a number.
    #[inline(never)]
    fn unary(&mut self, node: Node, scope: ScopeId) -> Expr {
        let Some(argument) = node.field("argument") else {
            self.walk_children(node, scope);
            return Expr::Unknown;
        };
        // Lowered first: a Python 2 literal (`-0777`, `-10L`) is refused there.
        let operand = self.expr(argument, scope);
        match argument.kind_str() {
            "integer" | "float" if self.text(argument).ends_with(['j', 'J']) => return Expr::Literal("complex"),
            "integer" if !self.text(argument).ends_with(['l', 'L']) => return Expr::Literal("int"),
            "float" => return Expr::Literal("float"),
            _ => {}
        }
        if let Some(method) = node.field("operator").and_then(|o| unary_operator_method(o.kind_str())) {
            self.operator_use(scope, operand, Expr::Unknown, line(node), method);
        }
        Expr::Unknown
    }

    /// Records an operator applied (see [`OperatorUse`]), unless neither operand can be an
    /// instance.
    pub(super) fn operator_use(&mut self, scope: ScopeId, left: Expr, right: Expr, line: u32, method: &'static str) {
        let may_be_instance =
            |e: &Expr| is_flow_worthy(e) && !matches!(e, Expr::Constant(_)) && parts(e, 0) <= MAX_OBJECT_SIZE;
        if may_be_instance(&left) || may_be_instance(&right) {
            self.scope(scope).operators.push(OperatorUse { left, right, line, method });
        }
    }

    pub(super) fn comprehension(&mut self, node: Node, scope: ScopeId) -> Expr {
        let inner = self.new_scope(ScopeKind::Anonymous, scope, None);
        let mut cursor = node.walk();
        let children: Vec<Node> = node.named_children(&mut cursor).collect();
        let mut first_clause = true;
        let mut filters: Vec<Node> = Vec::new();
        for child in &children {
            match child.kind_str() {
                "for_in_clause" => {
                    // The first iterable is evaluated in the enclosing scope.
                    let eval_scope = if first_clause { scope } else { inner };
                    first_clause = false;
                    let mut c2 = child.walk();
                    let rights: Vec<Node> = child.children_by_field_name("right", &mut c2).collect();
                    let mut iter = Expr::Unknown;
                    for r in rights {
                        iter = self.expr(r, eval_scope);
                        let is_async = child.child(0).is_some_and(|c| c.kind_str() == "async");
                        self.scope(eval_scope).iterations.push((iter.clone(), line(r), is_async));
                    }
                    if let Some(left) = child.field("left") {
                        self.bind_target(left, Binding::Iter(iter), inner, None);
                    }
                }
                "if_clause" => {
                    let mut c2 = child.walk();
                    let conds: Vec<Node> = child.named_children(&mut c2).collect();
                    for c in conds {
                        self.condition(c, inner);
                        filters.push(c);
                    }
                }
                _ => {}
            }
        }
        // The element is computed only for what passes the `if` clauses: their `isinstance`
        // tests narrow its reads (`[x.run() for x in xs if isinstance(x, A)]` calls `A.run`).
        // A name a clause binds again (`... if isinstance(x, A) for x in ys`, or a walrus in a
        // filter, which binds in the scope around) is not the one tested: not narrowed (a name
        // of the scope around that no clause binds is).
        let mut walrus_bound = Vec::new();
        for &condition in &filters {
            self.bound_keys(condition, &mut walrus_bound, 0);
        }
        let unchanged_since_test = |l: &Self, name: &Name| {
            l.scopes[inner as usize].bindings.iter().filter(|(n, _)| n == name).count() <= 1
                && !super::narrowing::binds_again(&walrus_bound, name.as_str())
        };
        let narrowed_before = self.narrowings.len();
        for &condition in &filters {
            for (name, ty) in self.instance_tests(condition, inner) {
                if unchanged_since_test(self, &name) {
                    self.narrowings.push(Narrowing { scope: inner, name, ty: Some(ty), negated: false });
                }
            }
            if let Some((name, ty, true)) = self.sole_instance_test(condition, inner)
                && unchanged_since_test(self, &name)
            {
                self.narrowings.push(Narrowing { scope: inner, name, ty: Some(ty), negated: true });
            }
        }
        let body = node.field("body");
        let element = match body {
            Some(b) if b.kind_str() == "pair" => {
                if let Some(k) = b.field("key") {
                    self.expr(k, inner);
                }
                b.field("value").map(|v| self.expr(v, inner)).unwrap_or(Expr::Unknown)
            }
            Some(b) => self.expr(b, inner),
            None => Expr::Unknown,
        };
        // The element is read wherever the comprehension's value goes (`standard = [s for s in
        // specs]`), where its own names are not bound (or name something else): what they
        // hold is written into it.
        self.narrowings.truncate(narrowed_before);
        let element = self.element_outside(element, inner);
        let kind = match node.kind_str() {
            "set_comprehension" => ContainerKind::Set,
            "dictionary_comprehension" => ContainerKind::Dict,
            _ => ContainerKind::List,
        };
        Expr::Container(kind, vec![element])
    }

    /// A comprehension's element as read outside it: the names its `for` clauses bind (in
    /// scope `inner`) replaced by what they hold (a later clause's iterable may read an earlier
    /// clause's name; the element's reads carry the `if` clauses' `isinstance` narrowing: `[x
    /// for x in xs if isinstance(x, A)]` holds the `A`s of `xs`). Unknown when that grows past
    /// [`MAX_SUBSTITUTED_PARTS`] (clauses that each pair the name before: `for b in (a, a)`).
    fn element_outside(&self, element: Expr, inner: ScopeId) -> Expr {
        let bindings = &self.scopes[inner as usize].bindings;
        if !mentions_name(&element, &|n| bindings.iter().any(|(b, _)| b == n)) {
            return element;
        }
        let mut names: FxHashMap<Name, Expr> = FxHashMap::default();
        for (name, binding) in bindings {
            let held = match binding {
                Binding::Value(e) => e.clone(),
                Binding::Unpack(e, i) => Expr::Element(Box::new(e.clone()), *i),
                Binding::Iter(e) => Expr::Subscript(Box::new(e.clone())),
                _ => Expr::Unknown,
            };
            let held = substitute_names(held, &names);
            let held = if parts(&held, 0) > MAX_SUBSTITUTED_PARTS { Expr::Unknown } else { held };
            names.insert(name.clone(), held);
        }
        let element = substitute_names(element, &names);
        if parts(&element, 0) > MAX_SUBSTITUTED_PARTS { Expr::Unknown } else { element }
    }
}

/// How large a comprehension's element may grow once its names are written out (see
/// [`Lowerer::element_outside`]).
pub(super) const MAX_SUBSTITUTED_PARTS: usize = 64;

/// How many parts `expr` has, counting no further than past [`MAX_SUBSTITUTED_PARTS`].
pub(super) fn parts(expr: &Expr, counted: usize) -> usize {
    if counted > MAX_SUBSTITUTED_PARTS {
        return counted;
    }
    let counted = counted + 1;
    match expr {
        Expr::Attr(e, _)
        | Expr::Call(e)
        | Expr::Subscript(e)
        | Expr::Item(e, _)
        | Expr::Slice(e, _)
        | Expr::Element(e, _)
        | Expr::Instance(e)
        | Expr::Returning(e)
        | Expr::Decorated(e, _)
        | Expr::Entered(e, _) => parts(e, counted),
        Expr::Container(_, es) | Expr::Added(es) | Expr::Union(es) => es.iter().fold(counted, |n, e| parts(e, n)),
        Expr::Keyed(items) => items.iter().fold(counted, |n, (_, e)| parts(e, n)),
        Expr::ItemAt(a, b) | Expr::Declared(a, b) | Expr::Narrowed(a, b) | Expr::NotInstance(a, b) => {
            parts(b, parts(a, counted))
        }
        Expr::Property(getter, setter, deleter) => {
            [setter, deleter].into_iter().flatten().fold(parts(getter, counted), |n, a| parts(a, n))
        }
        Expr::Name(_)
        | Expr::Lambda(_)
        | Expr::Literal(_)
        | Expr::Constant(_)
        | Expr::SelfRef
        | Expr::ClsRef
        | Expr::DefPath(_)
        | Expr::Unknown => counted,
    }
}

/// `expr` with each name of `names` replaced by what it holds.
fn substitute_names(expr: Expr, names: &FxHashMap<Name, Expr>) -> Expr {
    if names.is_empty() {
        return expr;
    }
    let sub = |e: Box<Expr>| Box::new(substitute_names(*e, names));
    let all = |es: Vec<Expr>| es.into_iter().map(|e| substitute_names(e, names)).collect::<Vec<_>>();
    match expr {
        Expr::Name(n) => match names.get(&n) {
            Some(held) => held.clone(),
            None => Expr::Name(n),
        },
        Expr::Attr(e, a) => Expr::Attr(sub(e), a),
        Expr::Call(e) => Expr::Call(sub(e)),
        Expr::Subscript(e) => Expr::Subscript(sub(e)),
        Expr::Container(kind, es) => Expr::Container(kind, all(es)),
        Expr::Keyed(items) => Expr::Keyed(items.into_iter().map(|(k, e)| (k, substitute_names(e, names))).collect()),
        Expr::Item(e, key) => Expr::Item(sub(e), key),
        Expr::Slice(e, start) => Expr::Slice(sub(e), start),
        Expr::Added(es) => Expr::Added(all(es)),
        Expr::Element(e, i) => Expr::Element(sub(e), i),
        Expr::Union(es) => Expr::Union(all(es)),
        Expr::ItemAt(a, b) => Expr::ItemAt(sub(a), sub(b)),
        Expr::Instance(e) => Expr::Instance(sub(e)),
        Expr::Declared(a, b) => Expr::Declared(sub(a), sub(b)),
        Expr::Narrowed(a, b) => Expr::Narrowed(sub(a), sub(b)),
        Expr::NotInstance(a, b) => Expr::NotInstance(sub(a), sub(b)),
        Expr::Returning(e) => Expr::Returning(sub(e)),
        Expr::Decorated(e, n) => Expr::Decorated(sub(e), n),
        Expr::Entered(e, is_async) => Expr::Entered(sub(e), is_async),
        Expr::Property(getter, setter, deleter) => Expr::Property(sub(getter), setter.map(sub), deleter.map(sub)),
        e @ (Expr::Lambda(_)
        | Expr::Literal(_)
        | Expr::Constant(_)
        | Expr::SelfRef
        | Expr::ClsRef
        | Expr::DefPath(_)
        | Expr::Unknown) => e,
    }
}
