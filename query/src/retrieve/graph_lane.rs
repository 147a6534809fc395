//! The graph lane: what an existing target already uses, then the candidates ranked by a
//! weighted sum of their features ([`CandidateFeatures::score`]).
//!
//! The features and their weights live here together, apart from the evidence they are read
//! from: the measuring tools (bench/retrieval-fit) keep a copy of the weights, and the test at
//! the end of this file checks that copy against this score.

use fresco_graph::{EdgeKind, Snapshot, UnitKind};
use rustc_hash::FxHashSet;

use super::Lanes;
use super::affinity::{WordRarity, dense_affinity, describe, words};
use super::candidates::{Tier, header_classes, mentioned_classes, reachable_candidates, returned_constructors};
use super::ids::{body_uses, identifiers_in, is_code_unit, is_unwritten, last_name, lies_within, owner_of};
use super::neighbours::{
    ImportUse, NeighbourUsage, callers_above, collaborator_classes, header_uses, initialisers_already_run,
    instance_attributes_out_of_reach, is_local_elsewhere, is_private_of_another_class, is_unread_variable,
    is_unused_private, own_classes, receiver_classes, shadowed_members,
};
use super::relatives::{AnalogueUsage, TypeUsage, UseShare, are_namesakes, are_nested_names, family_of, name_siblings};
use super::target::{Target, bound_definition, target_name};

/// The graph lane: the units the target can reach, ranked for it.
///
/// First (for an existing unit) what it already uses: its resolved callees, references and bases
/// (itself, when it calls itself), in order of first use, then what those call in turn. Then the
/// candidates it could use: members of its class and bases, the classes its signature or
/// docstring names (with their members), units of its own file, what the file's and the class's
/// other code uses, what the file imports (imported names, the modules it binds to a name, members of
/// imported modules and classes) and the members of the classes that code works with. A module
/// ranks like any candidate (what reads it is recorded as a `references` edge) but is never
/// pasted into the context text: its source is a whole file. A name defined more than once is one
/// candidate, the definition Python binds (an `@overload`'s implementation, a property's getter).
/// Candidates are scored by
/// - locality ([`Tier`]): what a method needs is most often on its own class, then in its file;
/// - usage by neighbours: how many of the class's other methods and the file's other units use
///   it (a class's methods work with the same attributes and collaborators);
/// - an import nothing else in the file uses: the code it was imported for is likely the target,
///   as likely as a member of its own class;
/// - word affinity with the target's signature and docstring, words weighted by how rare they
///   are among the candidates, and dense (embedding) affinity;
/// - the target's name: a namesake on a collaborator (a method often delegates to it), what the
///   methods of that name in its file, on its class's bases and in its direct subclasses use,
///   and what its name siblings (names that differ from it in one word) use;
/// - what other code working with the classes its header names uses of them;
/// - its return annotation: the constructor of the class it names (a function declared to
///   return a class most often builds one);
/// - the classes its class seems to hold in attributes, by the names its other methods call on
///   them unresolved (`self.connection.get_all_volumes()`): their members, by word and dense
///   affinity (duck typing as evidence, never as an edge);
/// - for a body not written yet, the target itself: recursion, likelier in a file whose other
///   functions call themselves.
/// - last, whatever else they have: a private member of another class (Python's convention keeps
///   it to its class), the instance attributes of its class for a `classmethod` or `staticmethod`
///   (it has no instance) and the initialisers of its class for an ordinary method (its instance
///   was set up before it runs).
///
/// How much the rest of the repository uses a candidate was a feature too: it changed Recall@10
/// by 0.001 on the retrieval benchmark and, counted through every file that refers to the
/// candidate's module, cost most of the lane's time on django: it is left out.
///
/// The weights are stated priors (locality first, then usage, then words) shrunk toward a
/// logistic fit on human-annotated dependencies (the tuning half of DevEval): half of the fit's
/// normalised weights added to the priors' (bench/retrieval-fit/blend.py). The fit alone
/// overfits: it ranked worse on tasks whose truth is the original body's graph edges; the blend
/// ranked better on projects it was not fitted on (bench/reports/retrieval-fit.md). The fit
/// moved weight to imports and to what the target's relatives use: what its family uses now
/// weighs more than membership of its class, which no longer comes first by itself.
///
/// `use_dense`: whether the dense affinity may be asked for (not when a query leaves the dense
/// lane out: that would embed the query all the same).
pub fn graph_lane(
    snapshot: &Snapshot,
    target: &Target,
    lanes: Option<&dyn Lanes>,
    use_dense: bool,
    analogues: &[String],
    k: usize,
) -> Vec<String> {
    let mut ranked: Vec<String> = Vec::new();
    let mut seen: FxHashSet<String> = FxHashSet::default();
    if let Some(id) = &target.id {
        // What its header uses (annotations, decorators) is not what its body needs first: for a
        // stub that is all it uses, and those units compete with the other candidates instead.
        // A function whose body calls itself lists itself too: recursion is a dependency (a
        // class naming itself in its body, `empty = staticmethod(lambda: Node())`, is not).
        if !snapshot.unit(id).is_some_and(|u| matches!(u.unit.kind, UnitKind::Function | UnitKind::Method)) {
            seen.insert(id.clone());
        }
        for dst in body_uses(snapshot, id) {
            if seen.insert(dst.clone()) {
                ranked.push(dst);
            }
        }
        // Their neighbourhood: what the directly used units call in turn.
        let direct = ranked.clone();
        seen.insert(id.clone());
        for d in direct {
            for (e, _) in snapshot.edges_from(&d) {
                if e.kind == EdgeKind::Calls
                    && snapshot.unit(&e.dst).is_some_and(|u| is_code_unit(u.unit))
                    && seen.insert(e.dst.to_string())
                {
                    ranked.push(e.dst.to_string());
                }
            }
        }
    }
    let mut scored: Vec<(f64, String)> = candidate_features(snapshot, target, lanes, use_dense, analogues, &seen)
        .into_iter()
        .map(|(id, features)| (features.score(), id))
        .collect();
    scored.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap_or(std::cmp::Ordering::Equal).then_with(|| a.1.cmp(&b.1)));
    // A scored name defined more than once (`@overload` declarations before their
    // implementation, a property's getter, setter and deleter, alternatives under `if`/`try`) is
    // one entry, the definition Python binds, at the best rank any of them earned: a body calls
    // the name, and four declarations of one function would take four places. The target's own
    // declarations stand for the target, which enters only as itself (recursion), and the
    // target itself is never replaced (an unwritten setter stays the setter).
    // What lies inside the target (a class's members, a function's nested functions) is its own
    // code, never what it needs: left out before the list is cut, or it would fill it.
    let target_unit = target.id.as_deref().and_then(|id| snapshot.unit(id));
    let inside_target = |id: &str| {
        target_unit
            .as_ref()
            .is_some_and(|t| snapshot.unit(id).is_some_and(|u| u.unit.id != t.unit.id && lies_within(&u, t)))
    };
    ranked.retain(|id| !inside_target(id));
    // The list is cut at 4k: candidates are placed, and their definitions looked up, only until
    // it is full.
    let limit = k.max(1).saturating_mul(4);
    let is_target = |id: &str| target.id.as_deref() == Some(id);
    let mut placed: FxHashSet<String> = ranked.iter().cloned().collect();
    for (_, id) in scored {
        if ranked.len() >= limit {
            break;
        }
        let bound = if is_target(&id) {
            id
        } else {
            match bound_definition(snapshot, &id) {
                declared_target if is_target(&declared_target) => continue,
                bound => bound,
            }
        };
        if !inside_target(&bound) && placed.insert(bound.clone()) {
            ranked.push(bound);
        }
    }
    ranked.truncate(limit);
    ranked
}

/// What the graph lane knows about one candidate: each value is a feature of the score.
#[derive(Clone, Debug, Default, serde::Serialize)]
// Read back only by the test that checks the measuring tools' copy of the weights.
#[cfg_attr(test, derive(serde::Deserialize))]
pub struct CandidateFeatures {
    /// How it is reachable ([`Tier`]), one-hot.
    pub own_class: f64,
    pub base_class: f64,
    pub mentioned_class: f64,
    pub class_neighbourhood: f64,
    pub file: f64,
    pub file_neighbourhood: f64,
    pub imported_name: f64,
    /// A module the file binds to a name (`from pkg import errors`, `import pkg.util as u`):
    /// the body may read it (`errors.Missing(...)`), and the module is then a dependency.
    pub imported_module: f64,
    pub imported: f64,
    /// 1 when nothing but an analogue's use reaches it ([`Tier::AnalogueUse`]): neither the
    /// target's class, its file nor its imports lead to it, so the body could use it only
    /// through an import the file does not have.
    pub analogue_only: f64,
    /// ln(1 + how many of the class's other methods use it in their bodies).
    pub class_users: f64,
    /// ln(1 + how many of the file's other units use it in their bodies (or at the module's top
    /// level)).
    pub file_users: f64,
    /// 1 when it is a name imported for the target (see [`ImportUse`]): nothing else in the file
    /// uses it and the target's body is not written. Ranks first.
    pub unused_import: f64,
    /// 1 when it is a private definition of the target's file (`_name`, not a dunder) that no
    /// code outside the target and the tests uses: a helper nothing else calls was written for
    /// the target, or is dead. The same evidence as an unused import, for what the file defines.
    pub unused_private: f64,
    /// 1 when it is a public variable of the target's module or class that no code outside the
    /// target and the tests uses (see [`is_unread_variable`]).
    pub unread_variable: f64,
    /// Rare-word overlap with the target's signature and docstring.
    pub word_affinity: f64,
    /// Dense similarity to the target text, as a z-score over the candidates.
    pub dense_affinity: f64,
    /// Use by the units most like the target (see [`analogues`](super::analogues)): the sum of
    /// 1 / rank over the analogues that call, read or inherit it in their bodies (not in their
    /// annotations or decorators). Similar code needs similar building blocks.
    pub analogue_users: f64,
    /// 1 when the target's signature or docstring names it as written (`timeout` in
    /// `def __init__(self, timeout)` for the attribute `self.timeout`).
    pub named_in_text: f64,
    /// How many of the target's two source-order neighbours (the function or method defined
    /// just before it and just after it, in the same class or module) use it in their bodies:
    /// code written next to each other tends to do related work.
    pub adjacent_users: f64,
    /// What analogues in other classes (or modules) use of their own owner, carried over by
    /// name to the target's owner: `Live.__exit__` calls `Live.stop`, so for
    /// `Progress.__exit__` the member `Progress.stop` counts (sum of 1 / analogue rank).
    pub analogue_role_users: f64,
    /// 1 when it has the target's name, up to leading underscores (not a dunder), and is not the
    /// target: a method often delegates to its namesake on a collaborator or a base
    /// (`Session.send` calls `HTTPAdapter.send`, `Response.aclose` calls
    /// `AsyncByteStream.aclose`), and a public name to its private implementation
    /// (`Live.get_renderable` calls `Live._get_renderable`; a property `x` reads `self._x`).
    pub same_name: f64,
    /// 1 when its name and the target's are built one from the other's words (see
    /// [`are_nested_names`]): `der_decode` calls `der_decode_partial`, `remove_tags` reads
    /// `self.tags`.
    pub nested_name: f64,
    /// 1 when it is such a namesake and a member of a class the target's class works with (its
    /// other methods use the class or its members): `Session.send` calls `HTTPAdapter.send`, and
    /// `Session.__init__` mounts an `HTTPAdapter`. A namesake elsewhere may only share the name.
    pub collaborator_namesake: f64,
    /// Use by the target's family (see [`family_of`]): the share of the methods of the target's
    /// name in its file and on its class's bases that use it in their bodies (or its counterpart
    /// on the target's class). The version an override extends and sibling implementations do
    /// the same job.
    pub family_users: f64,
    /// Use by the target's name siblings (see [`name_siblings`]): the share of the functions or
    /// methods of its class or module whose names differ from its name in one word that use it in
    /// their bodies (`_get_text_stdin` uses `_WindowsConsoleReader`; `_get_text_stdout`, its
    /// sibling, uses `_WindowsConsoleWriter`, and so may `_get_text_stderr`).
    pub sibling_users: f64,
    /// 1 when it is the constructor of a class the target's return annotation names (see
    /// [`returned_constructors`]): a function declared to return a class most often builds one.
    pub return_constructor: f64,
    /// Use by other code working with the classes the target's header names (see
    /// [`TypeUsage`]): the largest share, over those classes, of the functions using the class
    /// that also use it. Code taking a `Request` reads the same few of its members.
    pub type_users: f64,
    /// 1 when it calls or uses the target, directly or through one or two other functions (see
    /// [`callers_above`]): it stands above the target in the call graph, and what the target's
    /// body needs lies below it. Recursion is the exception.
    pub caller_of_target: f64,
    /// 1 when it is defined inside a function that does not contain the target: a local name
    /// of that function, which the target can reach only as a value handed to it (a decorator's
    /// inner function, a callback).
    pub local_elsewhere: f64,
    /// 1 when it is a member of one of the target's class's bases that the class, or a base
    /// before it in the method resolution order, defines again (see [`shadowed_members`]):
    /// `self.name` reaches the redefinition.
    pub shadowed: f64,
    /// 1 when it is a private member (`_name`, not a dunder) of a class that neither holds the
    /// target nor is its class or one of that class's bases (see
    /// [`is_private_of_another_class`]): Python's convention keeps it to its class. Ranks after
    /// every candidate without it.
    pub private_of_another_class: f64,
    /// 1 when the target is a `classmethod` or `staticmethod` and it is an instance attribute of
    /// the target's class or a base (see [`instance_attributes_out_of_reach`]): with no
    /// instance, the body reaches it only through one it makes. Ranks after every candidate
    /// without it.
    pub instance_out_of_reach: f64,
    /// 1 when it is the `__init__` of the target's class or a base and the target is an ordinary
    /// method (see [`initialisers_already_run`]): its instance was set up before it runs. Ranks
    /// after every candidate without it.
    pub initialiser_already_run: f64,
    /// 1 for the target itself, a candidate when its body is not written yet (a stub, or blanked):
    /// a function may call itself, and recursion is a dependency (DevEval annotates it for 3.3 %
    /// of its tuning half's tasks). Its other features stay 0: the score places it by these two.
    pub itself: f64,
    /// For the target itself: how many other functions and methods of its file call themselves
    /// (at most 3). Recursion runs in a file's style: a module of tree walkers and dict mergers.
    pub recursive_neighbours: f64,
    /// The word affinity of a member of a class the target's class seems to hold in an attribute
    /// (see [`receiver_classes`]), 0 for other candidates: of the methods of what
    /// `self.connection` holds, the one the target's words name.
    pub receiver_words: f64,
    /// The same with the dense affinity (its positive part).
    pub receiver_dense: f64,
}

/// The weight of evidence that outranks every other: more than all the others can add up to, so
/// the candidates that have it come first, in the order of the rest of their score.
const AHEAD_OF_ALL: f64 = 100.0;

impl CandidateFeatures {
    /// The graph lane's score: an import only the target can be using first, then a weighted
    /// sum of locality, usage by neighbours and relatives, and affinity: stated priors shrunk
    /// toward a fit on annotated dependencies (see [`graph_lane`]; the table is
    /// `bench/retrieval-fit/blend.py`'s output, and `fit.py`'s `STATED` repeats it).
    pub fn score(&self) -> f64 {
        3.0 * self.own_class
            + 3.0 * self.base_class
            + 2.25 * self.mentioned_class
            + 1.75 * self.class_neighbourhood
            + 1.75 * self.file
            + 0.75 * self.file_neighbourhood
            + 2.0 * self.imported_name
            + 1.5 * self.imported_module
            - 0.25 * self.imported
            + 1.25 * self.class_users
            + 0.5 * self.file_users
            + AHEAD_OF_ALL * self.unused_import
            + 3.75 * self.unused_private
            + 3.5 * self.unread_variable
            + 2.25 * self.word_affinity
            + 0.75 * self.dense_affinity
            + 2.25 * self.analogue_users
            + 1.5 * self.named_in_text
            + 2.0 * self.adjacent_users
            + 3.25 * self.analogue_role_users
            + 1.5 * self.same_name
            + 1.0 * self.nested_name
            + 2.5 * self.collaborator_namesake
            + 4.5 * self.family_users
            + 2.0 * self.sibling_users
            + 3.0 * self.return_constructor
            + 2.5 * self.type_users
            - 2.75 * self.analogue_only
            - 5.75 * self.caller_of_target
            - 5.0 * self.local_elsewhere
            - 4.25 * self.shadowed
            - AHEAD_OF_ALL * self.private_of_another_class
            - AHEAD_OF_ALL * self.instance_out_of_reach
            - AHEAD_OF_ALL * self.initialiser_already_run
            + 3.0 * self.itself
            + 4.0 * self.recursive_neighbours
            + 0.5 * self.receiver_words
            + 1.0 * self.receiver_dense
    }

    /// The score without the text lanes' evidence (word and dense affinity, what analogues
    /// use): the graph lane as structure alone, to measure what the hybrid adds.
    pub fn structure_score(&self) -> f64 {
        CandidateFeatures {
            word_affinity: 0.0,
            dense_affinity: 0.0,
            analogue_users: 0.0,
            analogue_role_users: 0.0,
            named_in_text: 0.0,
            same_name: 0.0,
            nested_name: 0.0,
            collaborator_namesake: 0.0,
            receiver_words: 0.0,
            receiver_dense: 0.0,
            ..self.clone()
        }
        .score()
    }
}

/// The candidates the graph lane ranks for `target` (excluding `exclude`) and their features.
pub fn candidate_features(
    snapshot: &Snapshot,
    target: &Target,
    lanes: Option<&dyn Lanes>,
    use_dense: bool,
    analogues: &[String],
    exclude: &FxHashSet<String>,
) -> Vec<(String, CandidateFeatures)> {
    let usage = NeighbourUsage::of(snapshot, target);
    let header = header_uses(snapshot, target);
    let analogue_use = AnalogueUsage::of(snapshot, target, analogues);
    let family_use = UseShare::of(snapshot, target, &family_of(snapshot, target));
    let sibling_use = UseShare::of(snapshot, target, &name_siblings(snapshot, target));
    let name = target_name(target);
    let constructors = returned_constructors(snapshot, target);
    let mentioned = mentioned_classes(snapshot, target);
    let type_use = TypeUsage::of(snapshot, target, &header_classes(snapshot, target));
    let import_use = ImportUse::of(snapshot, target, &usage, &header);
    let candidates = reachable_candidates(snapshot, target, &usage, &analogue_use, &mentioned, &constructors, exclude);
    let collaborators = collaborator_classes(snapshot, target, &usage);
    let candidate_classes: FxHashSet<&str> = candidates
        .iter()
        .filter_map(|c| owner_of(&c.id))
        .filter(|o| snapshot.kind_of(o) == Some(UnitKind::Class))
        .collect();
    let receivers: FxHashSet<String> =
        receiver_classes(snapshot, target, candidate_classes).into_iter().map(str::to_string).collect();
    let callers = callers_above(snapshot, target);
    let shadowed = shadowed_members(snapshot, target);
    let own_classes = own_classes(snapshot, target);
    let out_of_reach = instance_attributes_out_of_reach(snapshot, target);
    let already_run = initialisers_already_run(snapshot, target);
    let target_words: FxHashSet<String> = words(lanes, &target.own_text).into_iter().collect();
    let candidate_words: Vec<FxHashSet<String>> = candidates
        .iter()
        .map(|c| snapshot.unit(&c.id).map(|u| words(lanes, &describe(&u))).unwrap_or_default().into_iter().collect())
        .collect();
    let idf = WordRarity::over(&candidate_words);
    let identifiers = identifiers_in(&target.own_text);
    let dense = dense_affinity(lanes.filter(|_| use_dense), &target.text, &candidates);
    candidates
        .into_iter()
        .zip(&candidate_words)
        .zip(dense)
        .map(|((c, cand_words), dense)| {
            let one = |t: Tier| if c.tier == t { 1.0 } else { 0.0 };
            let namesake = name.is_some_and(|n| are_namesakes(last_name(&c.id), n));
            let word_affinity = idf.affinity(cand_words, &target_words);
            let on_receiver = if owner_of(&c.id).is_some_and(|o| receivers.contains(o)) { 1.0 } else { 0.0 };
            let features = CandidateFeatures {
                own_class: one(Tier::Class),
                base_class: one(Tier::BaseClass),
                mentioned_class: one(Tier::MentionedClass),
                class_neighbourhood: one(Tier::ClassNeighbourhood),
                file: one(Tier::File),
                file_neighbourhood: one(Tier::FileNeighbourhood),
                imported_name: one(Tier::ImportedName),
                imported_module: one(Tier::ImportedModule),
                imported: one(Tier::Imported),
                analogue_only: one(Tier::AnalogueUse),
                class_users: (usage.class_body_users(&c.id) as f64).ln_1p(),
                file_users: (usage.file_body_users(&c.id) as f64).ln_1p(),
                // Reached first as an imported name: not a member of its class, file or the like.
                unused_import: if matches!(c.tier, Tier::ImportedName | Tier::ImportedModule)
                    && import_use.imported_for_target(&c.id)
                {
                    1.0
                } else {
                    0.0
                },
                unused_private: if is_unused_private(snapshot, target, &header, &c.id) { 1.0 } else { 0.0 },
                unread_variable: if is_unread_variable(snapshot, target, &header, &c.id) { 1.0 } else { 0.0 },
                word_affinity,
                dense_affinity: dense,
                analogue_users: analogue_use.score(&c.id),
                named_in_text: if identifiers.contains(last_name(&c.id)) { 1.0 } else { 0.0 },
                adjacent_users: usage.adjacent_users(&c.id) as f64,
                analogue_role_users: analogue_use.role_score(&c.id),
                same_name: if namesake { 1.0 } else { 0.0 },
                nested_name: if name.is_some_and(|n| are_nested_names(last_name(&c.id), n)) { 1.0 } else { 0.0 },
                collaborator_namesake: if namesake && owner_of(&c.id).is_some_and(|o| collaborators.contains(o)) {
                    1.0
                } else {
                    0.0
                },
                family_users: family_use.share(&c.id),
                sibling_users: sibling_use.share(&c.id),
                return_constructor: if constructors.contains(&c.id) { 1.0 } else { 0.0 },
                type_users: type_use.share(&c.id),
                caller_of_target: if callers.contains(c.id.as_str()) { 1.0 } else { 0.0 },
                local_elsewhere: if is_local_elsewhere(snapshot, target, &c.id) { 1.0 } else { 0.0 },
                shadowed: if shadowed.contains(&c.id) { 1.0 } else { 0.0 },
                private_of_another_class: if is_private_of_another_class(snapshot, &own_classes, &c.id) {
                    1.0
                } else {
                    0.0
                },
                instance_out_of_reach: if out_of_reach.contains(&c.id) { 1.0 } else { 0.0 },
                initialiser_already_run: if already_run.contains(&c.id) { 1.0 } else { 0.0 },
                itself: 0.0,
                recursive_neighbours: 0.0,
                receiver_words: on_receiver * word_affinity,
                receiver_dense: on_receiver * dense.max(0.0),
            };
            (c.id, features)
        })
        .chain(itself_as_candidate(snapshot, target))
        .collect()
}

/// The target itself as a candidate, when it is a function or method whose body is not written
/// yet (see [`is_unwritten`]). A written body that calls itself lists it among what it uses; one
/// that does not, never.
fn itself_as_candidate(snapshot: &Snapshot, target: &Target) -> Option<(String, CandidateFeatures)> {
    let id = target.id.as_ref()?;
    let unit = snapshot.unit(id)?;
    // A stub calling itself (`raise NotImplementedError(f(x))`) lists itself among its uses.
    if !matches!(unit.unit.kind, UnitKind::Function | UnitKind::Method)
        || !is_unwritten(&unit)
        || body_uses(snapshot, id).contains(id)
    {
        return None;
    }
    let calls_itself = |other: &str| {
        snapshot.edges_from(other).into_iter().any(|(e, _)| e.kind == EdgeKind::Calls && *e.dst == *other)
    };
    let recursive_neighbours = unit
        .file
        .graph
        .units
        .iter()
        .filter(|u| matches!(u.kind, UnitKind::Function | UnitKind::Method) && u.id != *id)
        .filter(|u| calls_itself(&u.id))
        .take(3)
        .count();
    let features =
        CandidateFeatures { itself: 1.0, recursive_neighbours: recursive_neighbours as f64, ..Default::default() };
    Some((id.clone(), features))
}

/// The measuring tools (bench/retrieval-fit) rank the trace's candidates with a copy of the
/// weights, `STATED` in fit.py: it must be the score the lane uses, feature for feature.
#[cfg(test)]
mod weights_match_the_measuring_tools {
    use super::CandidateFeatures;

    /// `STATED = { "name": weight, ... }` of fit.py.
    fn stated_weights() -> Vec<(String, f64)> {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../bench/retrieval-fit/fit.py");
        let text = std::fs::read_to_string(path).expect("bench/retrieval-fit/fit.py is in the repository");
        let start = text.find("STATED = {").expect("fit.py defines STATED");
        let body = &text[start + "STATED = {".len()..];
        let body = &body[..body.find('}').expect("STATED's closing brace")];
        // One `"name": number` per comma; fit.py keeps the table free of comments for this.
        body.split(',')
            .map(str::trim)
            .filter(|entry| !entry.is_empty())
            .map(|entry| {
                let (name, weight) = entry
                    .split_once(':')
                    .unwrap_or_else(|| panic!("fit.py's STATED: `{entry}` is not `\"name\": weight`"));
                let weight = weight
                    .trim()
                    .parse()
                    .unwrap_or_else(|_| panic!("fit.py's STATED: the weight of `{entry}` is not a plain number"));
                (name.trim().trim_matches('"').to_string(), weight)
            })
            .collect()
    }

    /// The features by name, as the trace writes them.
    fn feature_names() -> Vec<String> {
        let json = serde_json::to_value(CandidateFeatures::default()).expect("features serialise");
        json.as_object().expect("an object").keys().cloned().collect()
    }

    fn with_one(name: &str) -> CandidateFeatures {
        let mut json = serde_json::to_value(CandidateFeatures::default()).expect("features serialise");
        json[name] = serde_json::json!(1.0);
        serde_json::from_value(json).expect("features deserialise")
    }

    #[test]
    fn fit_py_states_the_weights_the_score_uses() {
        let stated = stated_weights();
        let mut names: Vec<&str> = stated.iter().map(|(n, _)| n.as_str()).collect();
        names.sort_unstable();
        let mut features = feature_names();
        features.sort_unstable();
        assert_eq!(names, features, "fit.py's STATED names every feature, and nothing else");
        for (name, weight) in &stated {
            let score = with_one(name).score();
            assert!((score - weight).abs() < 1e-9, "{name}: the score weighs it {score}, fit.py {weight}");
        }
    }
}
