import Foundation
import StrataLog
import StrataModel
import StrataPredicate

// MARK: - Comparisons through a relationship key path

/// `team.name == "Otters"`, `team.league.name BEGINSWITH "N"`, `ANY members.email == %@`:
/// a comparison whose key path goes through relationships is served by finding the
/// destination's objects that satisfy the rest of the path first — a fetch of the
/// destination planned as any other (an index, or a scan of a small entity) — and reading
/// their referrers through the first relationship (spec 0008 Planner 3c).
///
/// The targets hold every destination object that can satisfy the rest as the context
/// reads it: the stored objects that satisfy it in the store, plus every object the context
/// holds changed, deleted, or with values of another version than the store's
/// (``JoinResolving/divergentObjects(of:_:cap:)``). A referrer of one of the latter is
/// judged by the whole comparison, as a full scan judges it (through the related objects as
/// the context holds them); a referrer of a stored match the context holds as stored
/// satisfies it (``FetchExecution/joinMatches(_:_:)``).
extension QueryPlanner {
    /// The most targets (destination objects) a comparison through a key path is planned
    /// with, and the most index entries read to find them: beyond it, the fetch is left to
    /// its other accesses (or a full scan). A destination is scanned in full to find them
    /// when it holds at most this many objects, or no more than the fetched entity (any
    /// number through a to-many).
    static let joinCap = 4096

    /// Finds the accesses of the comparisons through relationship key paths in `node`,
    /// where the analysis reads them: outside `NOT`.
    func collectJoins(_ node: PredicateNode, _ reader: borrowing LogReader, into found: inout [ComparisonPredicate: Candidate]) throws {
        switch node {
        case .comparison(let comparison):
            guard found[comparison] == nil, let join = try joinCandidate(comparison, reader) else { return }
            found[comparison] = join
        case .and(let children), .or(let children):
            for child in children { try collectJoins(child, reader, into: &found) }
        default:
            return
        }
    }

    /// The objects that may satisfy `comparison` through a relationship key path: the
    /// referrers, through its first relationship, of the destination objects that may
    /// satisfy the rest. Nil when it is no such comparison or the targets can't be found
    /// within ``joinCap``.
    func joinCandidate(_ comparison: ComparisonPredicate, _ reader: borrowing LogReader) throws -> Candidate? {
        guard let resolver, let (relationship, rest) = splitJoin(comparison),
            let destination = model.entity(named: relationship.destinationEntityName)
        else { return nil }
        var request = FetchRequest(entityName: destination.name, predicate: FormatPredicate(.comparison(rest)))
        request.substitutionVariables = self.request.substitutionVariables
        // With pending changes, stored rows of objects the context changed are skipped, as
        // in any fetch: they are among the divergent objects (and a derived side in the
        // rest of the path is read from the store's references too). Without them, the
        // fetched entity's rows are judged through the related objects' stored rows
        // (spec 0008, Pending changes 3): the targets are the destination's stored matches
        // as the store holds them, and nothing the context holds diverges.
        let pending = self.request.includesPendingChanges
        request.includesPendingChanges = pending
        // Scanning the destination in full is worth it when it holds few objects — or no
        // more than the fetched entities, whose full scan reads a related object for each
        // (for a to-many, every member of every object: never fewer than the scan).
        let scanLimit = relationship.isToMany ? Int.max : max(Self.joinCap, try reader.count(of: entity.name))
        guard let (stored, plan) = try resolver.storedObjects(matching: request, reader, cap: Self.joinCap, scanLimit: scanLimit),
            let divergent = pending
                ? try resolver.divergentObjects(of: model.selfAndSubentityNames(of: destination.name), reader, cap: Self.joinCap) : []
        else { return nil }
        var targets = Set(stored)
        let added = divergent.reduce(0) { $0 + (targets.insert($1).inserted ? 1 : 0) }
        guard targets.count <= Self.joinCap else { return nil }
        let sorted = targets.sorted()
        return Candidate(
            attribute: relationship.name, ranges: [], exact: false, rank: Candidate.rank(targets: sorted.count), answered: [],
            hasOwnIndex: true, targets: sorted, isMembership: relationship.isToMany,
            joined: QueryPlan.IndexScan.Join(plan: plan.description, comparison: comparison, changedTargets: divergent, changedInContext: added))
    }

    /// A comparison through a relationship key path split into its first relationship and
    /// the comparison its destination's objects must satisfy, or nil when it isn't one the
    /// planner serves:
    /// - the key path has two or more keys, the first a persistent relationship of the
    ///   fetched entity that can be read from the store's references (``readsFromReferences(_:)``),
    ///   every other but the last a persistent relationship, the last a persistent property;
    /// - the comparison is direct when the path holds no to-many relationship, `ANY` when
    ///   it holds one (the rest is `ANY` when it still holds one);
    /// - the other side is a constant (or variable) that isn't nil and holds no nil, and the
    ///   operator is false for a nil key path value (`==`, an order, `BETWEEN`, `IN`, a
    ///   string operator): an object whose path ends early (`team` nil) can't match, and it
    ///   refers to nothing.
    func splitJoin(_ comparison: ComparisonPredicate) -> (RelationshipDescription, ComparisonPredicate)? {
        guard comparison.modifier == .direct || comparison.modifier == .any else { return nil }
        // Most comparisons name one key: they are left at once.
        guard let (path, op, other) = Self.oriented(comparison), path.components.count >= 2 else { return nil }
        switch op {
        case .equalTo, .lessThan, .lessThanOrEqualTo, .greaterThan, .greaterThanOrEqualTo, .between, .in, .contains, .beginsWith,
            .endsWith, .like, .matches:
            break
        case .notEqualTo:
            return nil
        }
        guard let constant = resolve(other), !Self.holdsNull(constant) else { return nil }
        var keys: [String] = []
        for component in path.components {
            guard case .key(let key) = component else { return nil }
            keys.append(key)
        }
        guard keys.count >= 2, let first = entity.relationshipsByName[keys[0]], !first.isTransient, readsFromReferences(first) else {
            return nil
        }
        // The rest of the path, from the first relationship's destination.
        var current = model.entity(named: first.destinationEntityName)
        var restHasToMany = false
        for key in keys.dropFirst() {
            guard let here = current else { return nil }
            if let relationship = here.relationshipsByName[key] {
                guard !relationship.isTransient else { return nil }
                restHasToMany = restHasToMany || relationship.isToMany
                current = model.entity(named: relationship.destinationEntityName)
            } else if let attribute = here.attributesByName[key], !attribute.isTransient, key == keys.last {
                current = nil
            } else {
                return nil
            }
        }
        guard (comparison.modifier == .any) == (first.isToMany || restHasToMany) else { return nil }
        let rest = ComparisonPredicate(
            .keyPath(FormatKeyPath(components: keys.dropFirst().map { .key($0) })), op, other,
            modifier: restHasToMany ? .any : .direct, options: comparison.options)
        return (first, rest)
    }

    /// Whether `constant` is nil or a collection holding nil.
    static func holdsNull(_ constant: PredicateConstant) -> Bool {
        switch constant {
        case .null: true
        case .aggregate(let elements): elements.contains(where: holdsNull)
        default: false
        }
    }
}
