import Foundation
public import StrataLog
import StrataModel
public import StrataPredicate

// MARK: - The plan

/// How a fetch reads the store: which index (if any) finds its candidates, which part of
/// the predicate is left to filter them, and how the results are ordered. Returned by
/// ``ManagedObjectContext/explain(_:)``; the plan never changes a fetch's results, only how
/// fast they come (`Specs/0008-fetch-requests.md`, "Planner" and "Explain").
///
/// ```swift
/// var request = FetchRequest(entityName: "Person", predicate: try FormatPredicate(format: "age BETWEEN {30, 40}"))
/// print(try context.explain(request))   // index scan Person.age [30, 40]
/// ```
public struct QueryPlan: Sendable, Hashable, CustomStringConvertible {
    /// One index and the ranges of it that are read.
    ///
    /// For an index over one attribute, ``ranges`` are ranges of ``attribute``. For a
    /// compound index (a named index, spec 0002 §3.1, or a uniqueness constraint over
    /// several properties), ``prefix`` fixes the values of the leading ``properties`` and
    /// ``ranges`` are ranges of the property after them, ``attribute``.
    public struct IndexScan: Sendable, Hashable, CustomStringConvertible {
        /// The attribute whose ranges are read: the index's only attribute, or the property
        /// after the fixed ``prefix`` of a compound index.
        public let attribute: String
        /// The entity that declares the index: the fetched entity or one of its superentities.
        public let indexEntity: String
        /// The ranges read, in index order and disjoint; several ranges mean their union.
        public let ranges: [IndexRange]
        /// The index's properties in key order (`[attribute]` for a one-attribute index).
        public let properties: [String]
        /// The values of the first `prefix.count` ``properties``, which every entry read has
        /// (`.attribute`, or `.reference` for a to-one relationship).
        public let prefix: [LogValue]
        /// The name of the named index read (``FetchIndexDescription/name``), nil for an
        /// indexed attribute or a uniqueness constraint.
        public let indexName: String?
        /// For an equality on a to-one relationship (`team == %@`, `team IN %@`): the objects
        /// referred to, whose referrers through ``attribute`` the scan reads from the store's
        /// references (spec 0004 §6.2) instead of an index; ``ranges`` is then empty. Nil
        /// for an index scan.
        public let targets: [StoredObjectID]?
        /// For ``targets`` through a to-many relationship (`ANY tags == %@`,
        /// `tags CONTAINS %@`, `%@ IN tags`): the objects whose relationship holds one of
        /// them. False otherwise.
        public let isMembership: Bool
        /// For ``targets`` found through a relationship key path (`team.name == "Otters"`,
        /// `ANY members.email == %@`): how they were found — the plan of the fetch of the
        /// destination's stored objects that satisfy the rest of the path — and how many of
        /// them are objects the context holds changed or holds with values other than the
        /// store's. Nil otherwise.
        public let joined: Join?

        /// How the ``targets`` of a scan through a relationship key path were found (spec
        /// 0008 Planner 3c).
        public struct Join: Sendable, Hashable, CustomStringConvertible {
            /// The plan that found the destination's stored objects satisfying the rest of
            /// the key path's comparison (their stored rows; objects changed in the context
            /// are added instead, counted by ``changedInContext``).
            public let plan: String
            /// The comparison through the key path the targets serve.
            public let comparison: ComparisonPredicate
            /// The targets that are objects the context holds changed, or with values other
            /// than the store's: their referrers are judged by ``comparison``. The others'
            /// referrers satisfy it (those the context hasn't changed): the target satisfies
            /// the rest of the path as the store holds it, and the context holds it so.
            public let changedTargets: [StoredObjectID]
            /// How many targets were added because the context holds them otherwise than
            /// the store (``changedTargets`` that the destination's plan didn't find).
            public let changedInContext: Int

            /// Creates a description of how a join's targets were found.
            public init(plan: String, comparison: ComparisonPredicate, changedTargets: [StoredObjectID], changedInContext: Int) {
                self.plan = plan
                self.comparison = comparison
                self.changedTargets = changedTargets
                self.changedInContext = changedInContext
            }

            /// `(index scan Team.name = "Otters")`, with `+ 2 changed here` when the context
            /// added targets.
            public var description: String {
                "(\(plan))" + (changedInContext > 0 ? " + \(changedInContext) changed here" : "")
            }
        }

        /// Creates a description of a scan of one attribute's index.
        public init(attribute: String, indexEntity: String, ranges: [IndexRange]) {
            self.attribute = attribute
            self.indexEntity = indexEntity
            self.ranges = ranges
            properties = [attribute]
            prefix = []
            indexName = nil
            targets = nil
            isMembership = false
            joined = nil
        }

        /// Creates a description of a read of the objects `targets` themselves, those of them
        /// the store holds (`SELF == obj`, `SELF IN %@`): ``attribute`` is `SELF`,
        /// ``properties`` and ``ranges`` are empty.
        public init(objects targets: [StoredObjectID], entity: String) {
            attribute = "SELF"
            indexEntity = entity
            ranges = []
            properties = []
            prefix = []
            indexName = nil
            self.targets = targets
            isMembership = false
            joined = nil
        }

        /// Creates a description of a read of the objects whose `relationship` (declared by
        /// `indexEntity`) refers to one of `targets`: a to-one pointing at one, or, with
        /// `isMembership`, a to-many holding one; `joined` when the targets were found
        /// through a key path.
        public init(relationship: String, indexEntity: String, targets: [StoredObjectID], isMembership: Bool = false, joined: Join? = nil) {
            attribute = relationship
            self.indexEntity = indexEntity
            ranges = []
            properties = [relationship]
            prefix = []
            indexName = nil
            self.targets = targets
            self.isMembership = isMembership
            self.joined = joined
        }

        /// Creates a description of a scan of a compound index: `prefix` fixes the leading
        /// `properties`, and `ranges` are of the property after them (the last property when
        /// `prefix` fixes them all; no attribute, "", when `properties` is empty).
        public init(properties: [String], prefix: [LogValue], indexName: String?, indexEntity: String, ranges: [IndexRange]) {
            // Before, an empty `properties` trapped on an index out of range.
            attribute = properties.isEmpty ? "" : properties[min(prefix.count, properties.count - 1)]
            self.indexEntity = indexEntity
            self.ranges = ranges
            self.properties = properties
            self.prefix = prefix
            self.indexName = indexName
            targets = nil
            isMembership = false
            joined = nil
        }

        /// `Person.age [30, 40]`, `Person.email = "ada@example.com"`, `Person.age IN {30, 40}`;
        /// for a compound index its name (or its properties) first, then the fixed values:
        /// `Player[byTeamAndScore] team = Team/p3, score (90, +∞)`; for a relationship's
        /// referrers `Player.team = Team/p3` or `Player.team IN {Team/p1, Team/p2}`; through
        /// a to-many `Team.players CONTAINS Player/p3` or `… CONTAINS ANY {…}`; through a key
        /// path `Person.team IN (index scan Team.name = "Otters") [1 object]`.
        public var description: String {
            if let targets, let joined {
                let count = "[\(targets.count) object\(targets.count == 1 ? "" : "s")]"
                return "\(indexEntity).\(attribute) " + (isMembership ? "CONTAINS ANY " : "IN ") + "\(joined) \(count)"
            }
            if let targets {
                let names = targets.map(\.description)
                if isMembership {
                    return "\(indexEntity).\(attribute) CONTAINS " + (names.count == 1 ? names[0] : "ANY {\(names.joined(separator: ", "))}")
                }
                return "\(indexEntity).\(attribute) " + (names.count == 1 ? "= \(names[0])" : "IN {\(names.joined(separator: ", "))}")
            }
            guard properties.count > 1 else { return "\(indexEntity).\(attribute) \(QueryPlan.describe(ranges))" }
            var text = indexEntity + (indexName.map { "[\($0)]" } ?? "(\(properties.joined(separator: ", ")))")
            var parts = zip(properties, prefix).map { "\($0) = \(QueryPlan.describe($1))" }
            if ranges != QueryPlan.wholeIndex { parts.append("\(attribute) \(QueryPlan.describe(ranges))") }
            if !parts.isEmpty { text += " " + parts.joined(separator: ", ") }
            return text
        }
    }

    /// The way the store is read.
    public enum Kind: Sendable, Hashable {
        /// Every object of the entity (and its sub-entities, when included) is read.
        case fullScan
        /// The index is read over its ranges; each object found is a candidate.
        case indexScan(IndexScan)
        /// Several indexes are read (one per branch of an `OR`); the candidates are their
        /// union, without duplicates.
        case indexUnion([IndexScan])
        /// The index of the first sort key is walked in sort order (backwards when
        /// `descending`) over its ranges, and the walk stops once `stopsAfter` results
        /// (offset + limit) are found, plus any ties with the last of them. If the walk reads
        /// more than `fallbackAfter` objects without stopping, the fetch runs `fallback`
        /// (an index scan of the predicate's best index) instead.
        case indexOrder(IndexScan, descending: Bool, stopsAfter: Int, fallback: IndexScan?, fallbackAfter: Int)
        /// Nothing in the store can match (`FALSEPREDICATE`, an empty `IN`, contradictory
        /// ranges): no store read. Unsaved objects are still judged.
        case noScan
    }

    /// The fetched entity.
    public let entityName: String
    /// The sub-entities whose objects are fetched too (empty when `includesSubentities` is
    /// false or there are none).
    public let subentityNames: [String]
    /// Whether the entity has sub-entities the request leaves out (`includesSubentities = false`).
    public let excludesSubentities: Bool
    /// How the store is read.
    public let kind: Kind
    /// The part of the predicate the index doesn't answer, tested on each candidate (nil
    /// when the index answers it all). Every candidate is still checked against the whole
    /// predicate, so a plan can only narrow the candidates, never change the results.
    public let filter: FormatPredicate?
    /// Whether an in-memory filter (a Swift closure) runs after the predicate.
    public let hasInMemoryFilter: Bool
    /// The sort done in memory on the results (empty when unsorted, or when the index walk
    /// gives the order and only ties need sorting).
    public let sortDescriptors: [FetchSortDescriptor]
    /// Results skipped first.
    public let fetchOffset: Int
    /// At most this many results (0: no limit).
    public let fetchLimit: Int
    /// Whether unsaved inserts, updates and deletes are merged in.
    public let includesPendingChanges: Bool
    /// Whether the index answers the predicate exactly, so a count needs no record reads.
    let countsFromIndex: Bool

    /// The plan in one line, for example
    /// `index scan Person.age [30, 40] then filter (lastName BEGINSWITH "A"); sorted by lastName; limit 20`.
    public var description: String {
        var text: String
        switch kind {
        case .fullScan:
            text = "full scan \(entityName)"
        case .indexScan(let scan):
            text = "index scan \(scan)"
            if scan.indexEntity != entityName { text += " for \(entityName)" }
        case .indexUnion(let scans):
            text = "index union " + scans.map(\.description).joined(separator: " | ")
            if scans.contains(where: { $0.indexEntity != entityName }) { text += " for \(entityName)" }
        case .indexOrder(let scan, let descending, let stopsAfter, let fallback, let fallbackAfter):
            if scan.properties.count > 1 {
                // The index and its fixed values, then the walked property.
                let fixed = QueryPlan.IndexScan(
                    properties: scan.properties, prefix: scan.prefix, indexName: scan.indexName, indexEntity: scan.indexEntity,
                    ranges: QueryPlan.wholeIndex)
                text = "index order \(fixed) by \(scan.attribute) \(descending ? "descending" : "ascending")"
            } else {
                text = "index order \(scan.indexEntity).\(scan.attribute) \(descending ? "descending" : "ascending")"
            }
            if scan.ranges != QueryPlan.wholeIndex { text += " over \(QueryPlan.describe(scan.ranges))" }
            if scan.indexEntity != entityName { text += " for \(entityName)" }
            text += ", stops after \(stopsAfter)"
            if let fallback { text += " (falls back to index scan \(fallback) after \(fallbackAfter) objects)" }
        case .noScan:
            text = "no scan of \(entityName) (the predicate matches nothing stored)"
        }
        if !subentityNames.isEmpty {
            text += " (+\(subentityNames.count) sub-entit\(subentityNames.count == 1 ? "y" : "ies"))"
        } else if excludesSubentities {
            text += " (sub-entities excluded)"
        }
        if let filter { text += " then filter (\(filter))" }
        if hasInMemoryFilter { text += filter == nil ? " then filter (in-memory closure)" : " and an in-memory closure" }
        if !sortDescriptors.isEmpty {
            text += "; sorted by " + sortDescriptors.map { d in
                d.key + (d.ascending ? "" : " descending") + (d.caseInsensitive ? " (case-insensitive)" : "") + (d.diacriticInsensitive ? " (diacritic-insensitive)" : "") + (d.numeric ? " (numeric)" : "")
            }.joined(separator: ", ")
        }
        if case .indexOrder = kind {} else {
            if fetchOffset > 0 { text += "; offset \(fetchOffset)" }
            if fetchLimit > 0 { text += "; limit \(fetchLimit)" }
        }
        if !includesPendingChanges { text += "; stored state only" }
        return text
    }

    /// Every entry of an index, nil values first: what an unrestricted index walk reads.
    static let wholeIndex = [IndexRange.isNil, IndexRange.all]

    static func describe(_ ranges: [IndexRange]) -> String {
        if ranges.isEmpty { return "(nothing)" }
        let equalities = ranges.compactMap { range -> String? in
            if range.matchesNil { return "nil" }
            guard let lower = range.lower, let upper = range.upper, lower == upper, range.includesLower, range.includesUpper
            else { return nil }
            return describe(lower)
        }
        if equalities.count == ranges.count {
            return equalities.count == 1 ? "= \(equalities[0])" : "IN {\(equalities.joined(separator: ", "))}"
        }
        return ranges.map { range in
            if range.matchesNil { return "= nil" }
            if range.lower == nil && range.upper == nil { return "(not nil)" }
            return (range.includesLower && range.lower != nil ? "[" : "(") + (range.lower.map(describe) ?? "-∞") + ", "
                + (range.upper.map(describe) ?? "+∞") + (range.includesUpper && range.upper != nil ? "]" : ")")
        }.joined(separator: " ∪ ")
    }

    static func describe(_ value: LogValue) -> String {
        switch value {
        case .attribute(let value): describe(value)
        case .reference(let id): id.description
        case .references(let ids): "[" + ids.map(\.description).joined(separator: ", ") + "]"
        case .null: "nil"
        }
    }

    static func describe(_ value: AttributeValue) -> String {
        switch value {
        case .int16(let v): String(v)
        case .int32(let v): String(v)
        case .int64(let v): String(v)
        case .decimal(let v): "\(v)"
        case .double(let v): v.isInfinite ? (v < 0 ? "-∞" : "+∞") : String(v)
        case .float(let v): v.isInfinite ? (v < 0 ? "-∞" : "+∞") : String(v)
        case .string(let v): "\"" + v.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
        case .boolean(let v): v ? "YES" : "NO"
        case .date(let v) where v.timeIntervalSinceReferenceDate.isInfinite: v.timeIntervalSinceReferenceDate < 0 ? "-∞" : "+∞"
        case .date(let v):
            ISO8601DateFormatter.string(
                from: v, timeZone: TimeZone(secondsFromGMT: 0) ?? .current, formatOptions: [.withInternetDateTime, .withFractionalSeconds])
        case .binaryData(let v): "<\(v.count) bytes>"
        case .uuid(let v): v.uuidString
        case .uri(let v): v.absoluteString
        case .transformable(let v): "<transformable \(v.count) bytes>"
        }
    }
}

// MARK: - Ranges keyed by their index encoding

/// One bound of a range: the value, its index encoding (order-preserving bytes), and
/// whether the value itself is in.
struct KeyedBound {
    let value: AttributeValue
    let key: [UInt8]
    let inclusive: Bool

    init(_ value: AttributeValue, inclusive: Bool) {
        self.value = value
        var key: [UInt8] = []
        // A cut key (a long string or data value) stands for every value sharing its
        // prefix: such a bound must include its whole prefix group.
        let complete = IndexKeyEncoding.append(value, to: &key)
        self.key = key
        self.inclusive = inclusive || !complete
    }

    var isCut: Bool {
        var key: [UInt8] = []
        return !IndexKeyEncoding.append(value, to: &key)
    }

    /// Whether the value is an infinite double, float or date (the end of a range stopping
    /// short of the NaN keys).
    var isInfinite: Bool {
        switch value {
        case .double(let v): v.isInfinite
        case .float(let v): v.isInfinite
        case .date(let v): v.timeIntervalSinceReferenceDate.isInfinite
        default: false
        }
    }
}

/// A range of index keys: nil values only, or non-nil values between two bounds (nil
/// bounds are open). Comparing bounds compares their encodings, which compares values.
struct KeyedRange {
    var matchesNil = false
    var lower: KeyedBound?
    var upper: KeyedBound?

    static let nilValues = KeyedRange(matchesNil: true)
    static let allValues = KeyedRange()

    static func equal(_ value: AttributeValue) -> KeyedRange {
        KeyedRange(lower: KeyedBound(value, inclusive: true), upper: KeyedBound(value, inclusive: true))
    }

    var indexRange: IndexRange {
        if matchesNil { return .isNil }
        return IndexRange(lower: lower?.value, includesLower: lower?.inclusive ?? true, upper: upper?.value, includesUpper: upper?.inclusive ?? false)
    }

    var isEmpty: Bool {
        guard !matchesNil, let lower, let upper else { return false }
        let order = compareKeys(lower.key, upper.key)
        return order > 0 || (order == 0 && !(lower.inclusive && upper.inclusive))
    }

    /// -1, 0, 1 as `a` sorts before, with or after `b`.
    static func compareKeys(_ a: [UInt8], _ b: [UInt8]) -> Int {
        a.lexicographicallyPrecedes(b) ? -1 : (a == b ? 0 : 1)
    }

    func compareKeys(_ a: [UInt8], _ b: [UInt8]) -> Int { Self.compareKeys(a, b) }

    /// The higher of two lower bounds (nil: open).
    static func maxLower(_ a: KeyedBound?, _ b: KeyedBound?) -> KeyedBound? {
        guard let a else { return b }
        guard let b else { return a }
        let order = compareKeys(a.key, b.key)
        if order != 0 { return order > 0 ? a : b }
        return a.inclusive ? b : a  // the exclusive one is higher
    }

    /// The lower of two upper bounds (nil: open).
    static func minUpper(_ a: KeyedBound?, _ b: KeyedBound?) -> KeyedBound? {
        guard let a else { return b }
        guard let b else { return a }
        let order = compareKeys(a.key, b.key)
        if order != 0 { return order < 0 ? a : b }
        return a.inclusive ? b : a
    }

    /// The higher of two upper bounds (nil: open).
    static func maxUpper(_ a: KeyedBound?, _ b: KeyedBound?) -> KeyedBound? {
        guard let a, let b else { return nil }
        let order = compareKeys(a.key, b.key)
        if order != 0 { return order > 0 ? a : b }
        return a.inclusive ? a : b
    }

    func intersection(_ other: KeyedRange) -> KeyedRange? {
        if matchesNil || other.matchesNil { return matchesNil && other.matchesNil ? self : nil }
        let result = KeyedRange(lower: Self.maxLower(lower, other.lower), upper: Self.minUpper(upper, other.upper))
        return result.isEmpty ? nil : result
    }

    /// Sorted, overlapping ranges merged: disjoint ranges in index order (nil first), so
    /// no object is found twice.
    static func normalized(_ ranges: [KeyedRange]) -> [KeyedRange] {
        var result: [KeyedRange] = ranges.contains(where: \.matchesNil) ? [.nilValues] : []
        let sorted = ranges.filter { !$0.matchesNil && !$0.isEmpty }.sorted { a, b in
            guard let bl = b.lower else { return false }
            guard let al = a.lower else { return true }
            let order = compareKeys(al.key, bl.key)
            return order != 0 ? order < 0 : (al.inclusive && !bl.inclusive)
        }
        var current: KeyedRange?
        for range in sorted {
            guard var open = current else {
                current = range
                continue
            }
            // Overlapping or touching: merge.
            let touches: Bool
            if let upper = open.upper, let lower = range.lower {
                let order = compareKeys(lower.key, upper.key)
                touches = order < 0 || (order == 0 && (lower.inclusive || upper.inclusive))
            } else {
                touches = true
            }
            if touches {
                open.upper = maxUpper(open.upper, range.upper)
                current = open
            } else {
                result.append(open)
                current = range
            }
        }
        if let current { result.append(current) }
        return result
    }

    static func intersect(_ a: [KeyedRange], _ b: [KeyedRange]) -> [KeyedRange] {
        var result: [KeyedRange] = []
        for x in a { for y in b { if let both = x.intersection(y) { result.append(both) } } }
        return normalized(result)
    }
}

// MARK: - The planner

/// What the planner asks the context when a comparison goes through a relationship key
/// path (spec 0008 Planner 3c): the destination's stored objects that satisfy the rest of
/// the path, and the destination's objects the context holds otherwise than the store does.
protocol JoinResolving: AnyObject {
    /// The stored objects `request` selects in the store as `reader` reads it, judged by
    /// their stored rows (rows of objects the context changed are skipped), with the plan
    /// that found them; nil when that plan would scan more than `scanLimit` objects in full,
    /// or read more than `cap` index entries, or more than `cap` match.
    func storedObjects(matching request: FetchRequest<ManagedObject>, _ reader: borrowing LogReader, cap: Int, scanLimit: Int) throws -> (objects: [StoredObjectID], plan: QueryPlan)?
    /// The stored objects of `entities` whose values, as the context would read them, may
    /// differ from the store's: changed or deleted there, or holding values (or a fetched
    /// row) of another version than the store's, or a derived relationship side other than
    /// the store's references. Nil when more than `cap` objects of them are registered.
    func divergentObjects(of entities: [String], _ reader: borrowing LogReader, cap: Int) throws -> [StoredObjectID]?
    /// Which of `relationships` (derived sides of `entities`) some registered object holds
    /// with other objects than the store's references, as `reader` reads them: another
    /// writer changed a referrer since the side was read. A full scan reads such a side
    /// through the object, so the store's references can't find what it matches. All of
    /// them when more than `cap` objects hold one.
    func staleDerivedSides(_ relationships: Set<String>, of entities: [String], _ reader: borrowing LogReader, cap: Int) throws -> Set<String>
}

/// Chooses a ``QueryPlan`` for a fetch request (`Specs/0008-fetch-requests.md`, "Planner").
///
/// It reads the predicate's syntax tree: comparisons of an indexed attribute with a
/// constant (`==`, `IN`, `<`, `<=`, `>`, `>=`, `BETWEEN`, `== nil`) become index ranges in
/// the attribute's own value type; `AND` intersects ranges on one attribute and picks the
/// most selective index; `OR` unions its branches when each has one; anything else leaves
/// the entity to a full scan. A sort on an indexed attribute with a limit walks the index.
struct QueryPlanner {
    let model: ManagedObjectModel
    let entity: EntityDescription
    let request: FetchRequest<ManagedObject>
    /// The context, for comparisons through a relationship key path; nil: none is planned.
    let resolver: (any JoinResolving)?
    /// The accesses of the predicate's comparisons through a relationship key path, found
    /// with a reader before the predicate is analyzed (``plan(_:)``).
    var joins: [ComparisonPredicate: Candidate] = [:]
    /// The fetched entity's derived relationship sides that a registered object holds
    /// otherwise than the store's references (``JoinResolving/staleDerivedSides(_:of:_:cap:)``):
    /// not read from the references (3a, 3c), found with a reader by ``plan(_:)``.
    var staleSides: Set<String> = []
    /// The fetched entity's indexes over several properties, its own first.
    let compounds: [CompoundIndex]
    /// Every property of those indexes.
    let compoundProperties: Set<String>

    /// An index over several properties: a named index or a uniqueness constraint.
    struct CompoundIndex {
        /// The declaring entity: the fetched one or a superentity.
        let owner: String
        /// The named index's name; nil for a uniqueness constraint.
        let name: String?
        let properties: [String]
    }

    /// The store fetched from: object arguments of other stores (and temporary IDs) refer to
    /// nothing in it. Nil: none is known, and no relationship equality is planned.
    let storeUUID: UUID?

    init(model: ManagedObjectModel, entity: EntityDescription, request: FetchRequest<ManagedObject>, storeUUID: UUID?, resolver: (any JoinResolving)? = nil) {
        self.model = model
        self.entity = entity
        self.request = request
        self.storeUUID = storeUUID
        self.resolver = resolver
        // In the log's order (spec 0004 §4.2: uniqueness constraints, then named indexes),
        // one per list of properties: the store reads the first index over them, so explain
        // names that one.
        var compounds: [CompoundIndex] = []
        var seen: Set<[String]> = []
        for owner in [entity.name] + entity.superentityNames {
            guard let declaring = model.entity(named: owner) else { continue }
            for constraint in declaring.uniquenessConstraints where constraint.count > 1 && seen.insert(constraint).inserted {
                compounds.append(CompoundIndex(owner: owner, name: nil, properties: constraint))
            }
            for index in declaring.indexes where index.elements.count > 1 && seen.insert(index.propertyNames).inserted {
                compounds.append(CompoundIndex(owner: owner, name: index.name, properties: index.propertyNames))
            }
        }
        self.compounds = compounds
        compoundProperties = Set(compounds.flatMap(\.properties))
    }

    /// Objects counted at most when estimating an index range's size.
    static let estimateCap = 4096

    /// An index access proposed by part of the predicate: ranges on one attribute that
    /// contain every object the part matches.
    struct Candidate {
        var attribute: String
        var ranges: [KeyedRange]
        /// The ranges hold exactly the objects the part matches (no widened or cut bound).
        var exact: Bool
        /// Lower is more selective: 0 one value, 1 a few values, 2 many values, 3 a bounded
        /// range, 4 a half-open range, 5 every non-nil value.
        var rank: Int
        /// What every object in the ranges satisfies (left out of the displayed filter).
        var answered: Answers
        /// Whether `attribute` has an index of its own. A candidate on an attribute that is
        /// only part of compound indexes feeds ``QueryPlanner/compoundCandidates(_:)`` and
        /// is never read alone.
        var hasOwnIndex = true
        /// For a compound index: its properties in key order (empty: `attribute`'s own
        /// index), the fixed values of the leading ones, its name and declaring entity.
        var properties: [String] = []
        var prefix: [LogValue] = []
        var indexName: String?
        var indexEntity: String?
        /// How many properties the access constrains: 1 for one attribute's index; for a
        /// compound index its fixed properties, plus one when the next has ranges.
        var constrained = 1
        /// For an equality on a to-one relationship: the stored objects it may refer to
        /// (`ranges` is empty). Nil for attributes.
        var targets: [StoredObjectID]?
        /// Whether `targets` are members of a to-many relationship (objects holding any of
        /// them): two such in one conjunction are not intersected.
        var isMembership = false
        /// For targets found through a relationship key path: how (for explain).
        var joined: QueryPlan.IndexScan.Join?

        var isEmpty: Bool { targets.map(\.isEmpty) ?? ranges.isEmpty }

        /// Which entries a candidate reads, so candidates on one slot can be united: the
        /// attribute (or relationship), or the compound index with its fixed values and
        /// ranged attribute.
        struct Slot: Hashable {
            let attribute: String
            let properties: [String]
            let prefix: [LogValue]
            let indexEntity: String?
        }

        var slot: Slot { Slot(attribute: attribute, properties: properties, prefix: prefix, indexEntity: indexEntity) }

        /// The one value the candidate allows, when it is a single equality, and whether
        /// the value's key is exact (not a cut string or a decimal sharing its double).
        var point: (value: LogValue, exact: Bool)? {
            if let targets { return targets.count == 1 ? (.reference(targets[0]), true) : nil }
            guard ranges.count == 1, !ranges[0].matchesNil, let lower = ranges[0].lower, let upper = ranges[0].upper,
                lower.key == upper.key, lower.inclusive, upper.inclusive
            else { return nil }
            return (.attribute(lower.value), !lower.isCut)
        }

        /// The rank of an equality with `count` objects.
        static func rank(targets count: Int) -> Int { count <= 1 ? 0 : (count <= 8 ? 1 : 2) }

        static func rank(of ranges: [KeyedRange]) -> Int {
            var equalities = 0
            var worst = 0
            for range in ranges {
                if range.matchesNil { equalities += 1; continue }
                if let lower = range.lower, let upper = range.upper, lower.key == upper.key {
                    equalities += 1
                    continue
                }
                // A real range's end at an infinity (where open ends of real ranges stop, so
                // as to leave NaN out) ranks as open.
                let bounded = (range.lower.map { !$0.isInfinite } ?? false, range.upper.map { !$0.isInfinite } ?? false)
                switch bounded {
                case (true, true): worst = max(worst, 3)
                case (false, false): worst = max(worst, 5)
                default: worst = max(worst, 4)
                }
            }
            if worst > 0 { return worst }
            return equalities <= 1 ? 0 : (equalities <= 8 ? 1 : 2)
        }
    }

    /// What every object an access reads satisfies: comparisons its ranges answer exactly,
    /// and ORs whose branches it reads whole. Each holds of the objects as a formula, so it
    /// is left out wherever it occurs in the predicate; a comparison of one branch of an OR
    /// is never one of them (it holds only for that branch's objects). Before, an OR united
    /// its branches' comparisons: `(club == 'a' AND score == 1) OR (club == 'a' AND score ==
    /// 2)` read under one compound prefix answered `score == 1` for a conjunct outside it too.
    struct Answers: ExpressibleByArrayLiteral {
        /// A set: an AND of thousands of comparisons answers thousands, looked up once each.
        var comparisons: Set<ComparisonPredicate> = []
        /// ORs of the predicate (few: found by `==`, which two copies of one node answer at
        /// once, without hashing a large OR).
        var ors: [PredicateNode] = []

        init(arrayLiteral elements: ComparisonPredicate...) { comparisons = Set(elements) }

        func contains(_ comparison: ComparisonPredicate) -> Bool { comparisons.contains(comparison) }
        func contains(or node: PredicateNode) -> Bool { ors.contains(node) }

        /// What objects satisfying both `self` and `other` satisfy.
        func union(_ other: Answers) -> Answers {
            var result = self
            result.formUnion(other)
            return result
        }

        mutating func formUnion(_ other: Answers) {
            comparisons.formUnion(other.comparisons)
            for node in other.ors where !ors.contains(node) { ors.append(node) }
        }

        /// What objects satisfying `self` or `other` both satisfy.
        mutating func formIntersection(_ other: Answers) {
            comparisons.formIntersection(other.comparisons)
            ors.removeAll { !other.ors.contains($0) }
        }
    }

    /// What a predicate node says about where its matches can be.
    enum Narrowing {
        /// Nothing known: any object may match.
        case unrestricted
        /// No object matches.
        case nothing
        /// Every match is in each candidate (a conjunction), one candidate per attribute;
        /// `unions` are further alternatives from nested `OR`s, each a union of candidates.
        case restricted([String: Candidate], unions: [[Candidate]])
    }

    // MARK: Attributes and indexes

    /// The attribute `key` of the fetched entity, if it is a persistent attribute.
    func attribute(_ key: String) -> AttributeDescription? {
        guard let attribute = entity.attributesByName[key], !attribute.isTransient else { return nil }
        return attribute
    }

    /// The entity declaring the index that serves `attribute` for the fetched entity (the
    /// same rule as the log's schema: an indexed attribute, or a one-attribute uniqueness
    /// constraint, declared on the entity or a superentity).
    func indexEntity(for attribute: String) -> String? {
        for owner in [entity.name] + entity.superentityNames {
            guard let declaring = model.entity(named: owner) else { continue }
            if declaring.attributes.contains(where: { $0.name == attribute && $0.isIndexed && !$0.isTransient }) { return owner }
            if declaring.uniquenessConstraints.contains([attribute]) { return owner }
            if declaring.indexes.contains(where: { $0.propertyNames == [attribute] }) { return owner }
        }
        return nil
    }

    /// The accesses compound indexes offer for a conjunction whose candidates (one per
    /// attribute) are `byAttribute`: for each index, the leading properties fixed by single
    /// equalities, then the next property's ranges (every entry when it has none). An index
    /// whose first property has no candidate offers nothing; one whose first property alone
    /// is constrained only when that property has no index of its own.
    func compoundCandidates(_ byAttribute: [String: Candidate]) -> [Candidate] {
        var result: [Candidate] = []
        for index in compounds {
            var prefix: [LogValue] = []
            var answered: Answers = []
            var exact = true
            var fixed = 0
            while fixed < index.properties.count - 1, let part = byAttribute[index.properties[fixed]], let point = part.point,
                part.targets == nil || recordsReference(index.properties[fixed])
            {
                prefix.append(point.value)
                answered.formUnion(part.answered)
                exact = exact && part.exact && point.exact
                fixed += 1
            }
            let next = index.properties[fixed]
            // A relationship after the fixed values isn't ranged: its entries are read whole.
            let ranged = byAttribute[next].flatMap { $0.targets == nil ? $0 : nil }
            if fixed == 0 && (ranged == nil || ranged?.hasOwnIndex == true) { continue }
            var ranges = [KeyedRange.nilValues, .allValues]
            var rank = 5
            var constrained = fixed
            if let ranged {
                constrained += 1
                ranges = ranged.ranges
                rank = ranged.rank
                answered.formUnion(ranged.answered)
                exact = exact && ranged.exact
            }
            // Fixed equalities make it at least as selective as one equality.
            if fixed > 0 { rank = 0 }
            result.append(
                Candidate(
                    attribute: next, ranges: ranges, exact: exact, rank: rank, answered: answered,
                    hasOwnIndex: true, properties: index.properties, prefix: prefix, indexName: index.name, indexEntity: index.owner,
                    constrained: constrained))
        }
        return result
    }

    /// Whether the to-one relationship `name` of the fetched entity is the side the store
    /// records: only then do index keys hold its value (a derived side's is always nil).
    func recordsReference(_ name: String) -> Bool {
        guard let relationship = entity.relationshipsByName[name] else { return false }
        return RecordedSide.isRecorded(relationship, of: entity, in: model)
    }

    /// The accesses one conjunction offers on its own: its candidates on indexed attributes
    /// (and relationship equalities) and its compound-index candidates, compound ones first,
    /// those constraining the most properties first, then in the model's order (a tie in
    /// rank or size goes to them: they answer more of the predicate).
    func accesses(_ byAttribute: [String: Candidate]) -> [Candidate] {
        compoundCandidates(byAttribute).sorted { ($0.rank, -$0.constrained) < ($1.rank, -$1.constrained) }
            + byAttribute.values.filter(\.hasOwnIndex).sorted { ($0.rank, $0.attribute) < ($1.rank, $1.attribute) }
    }

    // MARK: Planning

    /// The plan; `reader` answers which indexes exist and how large ranges are, and finds
    /// the targets of comparisons through relationship key paths.
    func plan(_ reader: borrowing LogReader) throws -> QueryPlan {
        guard let resolver, let predicate = request.predicate else { return try planResolved(reader) }
        var resolved = self
        let derived = Self.firstKeys(of: predicate.node).filter { name in
            entity.relationshipsByName[name].map { !RecordedSide.isRecorded($0, of: entity, in: model) } ?? false
        }
        // Without pending changes a derived side is read from the store's references, as
        // the plans read it: a side a registered object holds stale doesn't matter.
        if !derived.isEmpty && request.includesPendingChanges {
            resolved.staleSides = try resolver.staleDerivedSides(
                derived, of: model.selfAndSubentityNames(of: entity.name), reader, cap: Self.joinCap)
        }
        var joins: [ComparisonPredicate: Candidate] = [:]
        try resolved.collectJoins(predicate.node, reader, into: &joins)
        resolved.joins = joins
        return try resolved.planResolved(reader)
    }

    /// The first key of each key path compared in `node` (`team` of `team.name == "T3"`).
    static func firstKeys(of node: PredicateNode) -> Set<String> {
        switch node {
        case .comparison(let comparison):
            var keys: Set<String> = []
            for case .keyPath(let path) in [comparison.leftExpression, comparison.rightExpression] {
                if case .key(let key)? = path.components.first { keys.insert(key) }
            }
            return keys
        case .and(let children), .or(let children):
            return children.reduce(into: []) { $0.formUnion(firstKeys(of: $1)) }
        case .not(let child):
            return firstKeys(of: child)
        case .constant:
            return []
        }
    }

    /// The plan, once ``joins`` are found.
    private func planResolved(_ reader: borrowing LogReader) throws -> QueryPlan {
        let allSubentities = Array(model.selfAndSubentityNames(of: entity.name).dropFirst())
        let narrowing = request.predicate.map { analyze($0.node) } ?? .unrestricted
        var kind: QueryPlan.Kind = .fullScan
        var answered: Answers = []
        var inMemorySort = request.sortDescriptors
        var countsFromIndex = false
        /// For an index union: what each member answers exactly.
        var unionMembers: [Answers]?

        func scan(_ candidate: Candidate) -> QueryPlan.IndexScan {
            if let targets = candidate.targets, candidate.attribute == "SELF" {
                return QueryPlan.IndexScan(objects: targets, entity: entity.name)
            }
            if let targets = candidate.targets {
                return QueryPlan.IndexScan(
                    relationship: candidate.attribute, indexEntity: relationshipEntity(for: candidate.attribute) ?? entity.name, targets: targets,
                    isMembership: candidate.isMembership, joined: candidate.joined)
            }
            guard !candidate.properties.isEmpty else {
                return QueryPlan.IndexScan(
                    attribute: candidate.attribute, indexEntity: indexEntity(for: candidate.attribute) ?? entity.name,
                    ranges: candidate.ranges.map(\.indexRange))
            }
            return QueryPlan.IndexScan(
                properties: candidate.properties, prefix: candidate.prefix, indexName: candidate.indexName,
                indexEntity: candidate.indexEntity ?? entity.name, ranges: candidate.ranges.map(\.indexRange))
        }

        var byAttribute: [String: Candidate] = [:]
        var unions: [[Candidate]] = []
        switch narrowing {
        case .nothing: kind = .noScan
        case .unrestricted: break
        case .restricted(let candidates, let more):
            byAttribute = candidates
            unions = more
        }
        if kind != .noScan {
            let order = request.fetchLimit > 0 ? try orderAccess(reader, byAttribute) : nil
            let singles = accesses(byAttribute)
            let best: [Candidate]?
            if let order, !order.walk.prefix.isEmpty, let walked = singles.first(where: { $0.slot == order.walk.slot }) {
                // A walk of a compound index under fixed values reads about as many entries
                // as the results it needs: another access wins only when it holds fewer
                // than a few times that (then scanning it and sorting is cheaper); the walk
                // itself isn't counted.
                let stopsAfter = Self.saturatingSum(max(0, request.fetchOffset), request.fetchLimit)
                let threshold = min(Self.estimateCap, max(64, stopsAfter.multipliedReportingOverflow(by: 4).overflow ? Int.max : stopsAfter * 4))
                best = try choose(against: walked, threshold: threshold, singles.filter { $0.slot != walked.slot }.map { [$0] } + unions, reader)
            } else {
                best = try choose(singles.map { [$0] } + unions, reader)
            }
            if let order {
                // A limited sort on an indexed attribute: walk that index in order (or a
                // compound index whose leading properties the predicate fixes, then the sort
                // attribute). When another index narrows the predicate, walk only if that
                // index's range is large (then a limited walk reads fewer objects), with its
                // scan as a fallback should the walk run long.
                var walk = true
                var fallback: Candidate?
                if let best, !(best.count == 1 && best[0].slot == order.walk.slot) {
                    if best.count == 1, best[0].rank >= 3, try estimate(best[0], reader, cap: Self.estimateCap) >= Self.estimateCap {
                        fallback = best[0]
                    } else {
                        walk = false
                    }
                }
                if walk {
                    kind = .indexOrder(
                        scan(order.walk), descending: !order.ascending,
                        stopsAfter: Self.saturatingSum(max(0, request.fetchOffset), request.fetchLimit),
                        fallback: fallback.map(scan), fallbackAfter: fallback == nil ? 0 : Self.estimateCap)
                    answered = order.walk.answered
                    inMemorySort = Array(request.sortDescriptors.dropFirst())
                }
            }
            if case .indexOrder = kind {} else if let best {
                if best.count == 1 {
                    kind = .indexScan(scan(best[0]))
                    answered = best[0].answered
                    if let predicate = request.predicate, best[0].exact {
                        countsFromIndex = residual(predicate.node, answered: answered) == nil
                    }
                } else {
                    kind = .indexUnion(best.map(scan))
                    unionMembers = best.map(\.answered)
                }
            }
        }
        var filter: FormatPredicate?
        if let predicate = request.predicate, kind != .noScan {
            if let unionMembers {
                filter = residual(predicate.node, union: unionMembers).map(FormatPredicate.init)
            } else {
                filter = residual(predicate.node, answered: answered).map(FormatPredicate.init)
            }
        }
        return QueryPlan(
            entityName: entity.name, subentityNames: request.includesSubentities ? allSubentities : [],
            excludesSubentities: !request.includesSubentities && !allSubentities.isEmpty, kind: kind,
            filter: filter, hasInMemoryFilter: request.memoryFilter != nil,
            sortDescriptors: inMemorySort, fetchOffset: request.fetchOffset, fetchLimit: request.fetchLimit,
            includesPendingChanges: request.includesPendingChanges, countsFromIndex: countsFromIndex)
    }

    /// `a + b`, or `Int.max` when that overflows.
    static func saturatingSum(_ a: Int, _ b: Int) -> Int {
        let (sum, overflow) = a.addingReportingOverflow(b)
        return overflow ? .max : sum
    }

    /// The index walk that gives the first sort descriptor's order, with the ascending flag:
    /// the sort key is a persistent attribute of a type whose index order is the sort's
    /// order, compared case-sensitively, and either a compound index has it right after
    /// leading properties the conjunction `byAttribute` fixes by equalities (preferred: the
    /// walk reads only those), or it has an index of its own, or it leads a compound index.
    /// The walk's ranges are the sort key's candidate ranges, or every entry.
    func orderAccess(
        _ reader: borrowing LogReader, _ byAttribute: [String: Candidate]
    ) throws -> (walk: Candidate, ascending: Bool)? {
        guard let first = request.sortDescriptors.first, first.usesPlainOrder, let attribute = attribute(first.key) else { return nil }
        switch attribute.attributeType {
        case .int16, .int32, .int64, .double, .float, .decimal, .date, .string, .boolean: break
        default: return nil
        }
        for compound in compoundCandidates(byAttribute) where compound.attribute == attribute.name && !compound.prefix.isEmpty {
            guard try reader.hasIndex(entity: entity.name, properties: compound.properties) else { continue }
            return (compound, first.ascending)
        }
        let sorted = byAttribute[attribute.name]
        let whole = Candidate(attribute: attribute.name, ranges: [.nilValues, .allValues], exact: true, rank: 5, answered: [])
        if try reader.hasIndex(entity: entity.name, attribute: attribute.name) {
            var walk = sorted ?? whole
            walk.hasOwnIndex = true
            return (walk, first.ascending)
        }
        for index in compounds where index.properties[0] == attribute.name {
            guard try reader.hasIndex(entity: entity.name, properties: index.properties) else { continue }
            var walk = sorted ?? whole
            walk.properties = index.properties
            walk.indexName = index.name
            walk.indexEntity = index.owner
            walk.hasOwnIndex = true
            return (walk, first.ascending)
        }
        return nil
    }

    /// The most selective of the alternatives (each one candidate, or a union of several):
    /// by rank, then by counting each range's objects up to the best count so far.
    func choose(_ options: [[Candidate]], _ reader: borrowing LogReader) throws -> [Candidate]? {
        guard !options.isEmpty else { return nil }
        if options.count == 1 { return options[0] }
        let ordered = Self.byRank(options)
        let size = try ordered[0].reduce(0) { try $0 + estimate($1, reader, cap: Self.estimateCap) }
        return try smallest(ordered.dropFirst(), than: ordered[0], size: size, reader)
    }

    /// `walked` (the access an index walk reads), unless one of `options` holds fewer than
    /// `threshold` objects: then the smallest of those.
    func choose(against walked: Candidate, threshold: Int, _ options: [[Candidate]], _ reader: borrowing LogReader) throws -> [Candidate] {
        try smallest(Self.byRank(options)[...], than: [walked], size: threshold, reader)
    }

    /// Alternatives in rank order (an alternative ranks as its least selective member).
    static func byRank(_ options: [[Candidate]]) -> [[Candidate]] {
        func rank(_ option: [Candidate]) -> Int { option.map(\.rank).max() ?? 5 }
        return options.sorted { rank($0) < rank($1) }
    }

    /// The first of `options` holding fewer objects than `best` (of `size`), and so on:
    /// each counted up to the best size so far.
    func smallest(_ options: ArraySlice<[Candidate]>, than best: [Candidate], size: Int, _ reader: borrowing LogReader) throws -> [Candidate] {
        var best = best
        var bestSize = size
        for option in options where bestSize > 0 {
            var size = 0
            for candidate in option {
                size += try estimate(candidate, reader, cap: bestSize)
                if size >= bestSize { break }
            }
            if size < bestSize {
                best = option
                bestSize = size
            }
        }
        return best
    }

    /// The number of index entries in `candidate`'s ranges, counting at most `cap`.
    func estimate(_ candidate: Candidate, _ reader: borrowing LogReader, cap: Int) throws -> Int {
        if let targets = candidate.targets, candidate.attribute == "SELF" { return min(targets.count, cap) }
        if let targets = candidate.targets {
            var count = 0
            for target in targets where count < cap {
                try reader.forEachReferrer(to: target, through: candidate.attribute, of: entity.name) { _ in
                    count += 1
                    return count >= cap ? .stop : .next
                }
            }
            return count
        }
        var count = 0
        for range in candidate.ranges where count < cap {
            try reader.scanIndex(
                entity: entity.name, properties: candidate.properties.isEmpty ? [candidate.attribute] : candidate.properties,
                prefix: candidate.prefix, range: range.indexRange
            ) { _ in
                count += 1
                return count >= cap ? .stop : .next
            }
        }
        return count
    }

    /// `node` without what every row of an index union satisfies; nil when nothing is left.
    /// A comparison one member answers holds only for that member's rows, so only an OR
    /// with, for every member, a branch that member answers is dropped.
    func residual(_ node: PredicateNode, union members: [Answers]) -> PredicateNode? {
        switch node {
        case .and(let children):
            let left = children.compactMap { residual($0, union: members) }
            if left.isEmpty { return nil }
            return left.count == 1 ? left[0] : .and(left)
        case .or(let children):
            let covered = members.allSatisfy { answered in
                answered.contains(or: node) || children.contains { residual($0, answered: answered) == nil }
            }
            return covered ? nil : node
        case .constant(true):
            return nil
        default:
            return node
        }
    }

    /// `node` without what `answered` holds; nil when nothing is left.
    func residual(_ node: PredicateNode, answered: Answers) -> PredicateNode? { Self.residual(node, answered: answered) }

    /// `node` without what `answered` holds; nil when nothing is left.
    static func residual(_ node: PredicateNode, answered: Answers) -> PredicateNode? {
        switch node {
        case .comparison(let comparison):
            return answered.contains(comparison) ? nil : node
        case .and(let children):
            let left = children.compactMap { residual($0, answered: answered) }
            if left.isEmpty { return nil }
            return left.count == 1 ? left[0] : .and(left)
        case .or(let children):
            // An OR is answered when it is one of the answered ORs, or each branch is.
            if answered.contains(or: node) { return nil }
            return children.allSatisfy({ residual($0, answered: answered) == nil }) ? nil : node
        case .constant(true):
            return nil
        default:
            return node
        }
    }

    // MARK: Reading the predicate

    func analyze(_ node: PredicateNode) -> Narrowing {
        switch node {
        case .constant(let value):
            return value ? .unrestricted : .nothing
        case .not:
            return .unrestricted
        case .comparison(let comparison):
            guard let candidate = candidate(comparison) else { return .unrestricted }
            return candidate.isEmpty ? .nothing : .restricted([candidate.attribute: candidate], unions: [])
        case .and(let children):
            var byAttribute: [String: Candidate] = [:]
            var unions: [[Candidate]] = []
            for child in children {
                switch analyze(child) {
                case .nothing: return .nothing
                case .unrestricted: continue
                case .restricted(let more, let moreUnions):
                    unions += moreUnions
                    for (attribute, candidate) in more {
                        guard let existing = byAttribute[attribute] else {
                            byAttribute[attribute] = candidate
                            continue
                        }
                        if existing.isMembership || candidate.isMembership {
                            // `ANY tags == a AND ANY tags == b`: each holds for other objects'
                            // sets; one narrows, the other is filtered.
                            continue
                        }
                        if let mine = existing.targets, let theirs = candidate.targets {
                            // Two equalities on one relationship: the objects both allow.
                            let both = Set(theirs)
                            let kept = mine.filter { both.contains($0) }
                            if kept.isEmpty { return .nothing }
                            var merged = existing
                            merged.targets = kept
                            merged.exact = existing.exact && candidate.exact
                            merged.rank = Candidate.rank(targets: kept.count)
                            merged.answered = existing.answered.union(candidate.answered)
                            // The objects both allow, named one by one.
                            merged.joined = nil
                            byAttribute[attribute] = merged
                            continue
                        }
                        let ranges = KeyedRange.intersect(existing.ranges, candidate.ranges)
                        if ranges.isEmpty { return .nothing }
                        byAttribute[attribute] = Candidate(
                            attribute: attribute, ranges: ranges, exact: existing.exact && candidate.exact,
                            rank: Candidate.rank(of: ranges), answered: existing.answered.union(candidate.answered),
                            hasOwnIndex: existing.hasOwnIndex)
                    }
                }
            }
            return byAttribute.isEmpty && unions.isEmpty ? .unrestricted : .restricted(byAttribute, unions: unions)
        case .or(let children):
            var branches: [Candidate] = []
            // Whether each access reads only objects its branch matches.
            var whole: [Bool] = []
            for child in children {
                switch analyze(child) {
                case .nothing: continue
                case .unrestricted: return .unrestricted
                case .restricted(let byAttribute, let unions):
                    // The branch's most selective access (by rank; compound indexes first).
                    let single = accesses(byAttribute).min { $0.rank < $1.rank }
                    let union = unions.min { ($0.map(\.rank).max() ?? 5) < ($1.map(\.rank).max() ?? 5) }
                    let chosen: [Candidate]
                    if let single, union.map({ single.rank <= ($0.map(\.rank).max() ?? 5) }) ?? true {
                        chosen = [single]
                    } else if let union {
                        chosen = union
                    } else {
                        // Only attributes without an index of their own, and no compound
                        // index they fill: the branch can be anywhere.
                        return .unrestricted
                    }
                    for access in chosen {
                        branches.append(access)
                        whole.append(residual(child, answered: access.answered) == nil)
                    }
                }
            }
            if branches.isEmpty { return .nothing }
            // Several branches on one attribute: one index, ranges united. The branches'
            // ranges are gathered in place and normalized once per attribute (an OR of n
            // equalities is planned in O(n log n), as `IN` is).
            var united: [Candidate] = []
            var slots: [Candidate.Slot: Int] = [:]
            var gathered: [Bool] = []
            // Whether every access united in a slot reads only objects its branch matches:
            // then each object the slot reads matches the OR.
            var answersOr: [Bool] = []
            for (branch, whole) in zip(branches, whole) {
                if let slot = slots[branch.slot] {
                    united[slot].ranges += branch.ranges
                    if let more = branch.targets {
                        united[slot].targets = (united[slot].targets ?? []) + more
                        // Several branches' objects, named one by one.
                        united[slot].joined = nil
                    }
                    united[slot].exact = united[slot].exact && branch.exact
                    // Only what every branch united here answers holds for all the slot reads.
                    united[slot].answered.formIntersection(branch.answered)
                    gathered[slot] = true
                    answersOr[slot] = answersOr[slot] && whole
                } else {
                    slots[branch.slot] = united.count
                    united.append(branch)
                    gathered.append(false)
                    answersOr.append(whole)
                }
            }
            for slot in united.indices where answersOr[slot] { united[slot].answered.ors.append(node) }
            for slot in united.indices where gathered[slot] {
                if let targets = united[slot].targets {
                    united[slot].targets = Array(Set(targets)).sorted()
                    united[slot].rank = Candidate.rank(targets: united[slot].targets?.count ?? 0)
                    continue
                }
                united[slot].ranges = KeyedRange.normalized(united[slot].ranges)
                united[slot].rank = Candidate.rank(of: united[slot].ranges)
            }
            // One access on an attribute's own index stands with the conjunction's others (an
            // enclosing AND intersects it with them); a compound one stays an alternative.
            if united.count == 1 && united[0].properties.isEmpty { return .restricted([united[0].attribute: united[0]], unions: []) }
            return .restricted([:], unions: [united])
        }
    }

    /// The index ranges holding every object `comparison` can match, or nil when no index
    /// serves it.
    func candidate(_ comparison: ComparisonPredicate) -> Candidate? {
        if !joins.isEmpty, let join = joins[comparison] { return join }
        if let membership = membershipCandidate(comparison) { return membership }
        guard comparison.modifier == .direct else { return nil }
        if let objects = objectsCandidate(comparison) { return objects }
        guard let (path, op, other) = Self.oriented(comparison), path.components.count == 1, case .key(let key) = path.components[0] else {
            return nil
        }
        if let relationship = entity.relationshipsByName[key] {
            return referenceCandidate(comparison, relationship, op, other)
        }
        guard let attribute = attribute(key) else { return nil }
        let hasOwnIndex = indexEntity(for: key) != nil
        guard hasOwnIndex || compoundProperties.contains(key) else { return nil }
        let type = attribute.attributeType
        if type == .string && (comparison.options.contains(.caseInsensitive) || comparison.options.contains(.diacriticInsensitive)) {
            return nil
        }
        guard let constant = resolve(other) else { return nil }
        var ranges: [KeyedRange] = []
        var exact = true
        func add(_ built: RangeBuilder.Built?) -> Bool {
            guard let built else { return false }
            ranges += built.ranges
            exact = exact && built.exact
            return true
        }
        switch op {
        case .equalTo, .lessThan, .lessThanOrEqualTo, .greaterThan, .greaterThanOrEqualTo:
            guard add(RangeBuilder.ranges(type, op, constant)) else { return nil }
        case .between:
            guard case .aggregate(let bounds) = constant, bounds.count == 2,
                let low = RangeBuilder.ranges(type, .greaterThanOrEqualTo, bounds[0]),
                let high = RangeBuilder.ranges(type, .lessThanOrEqualTo, bounds[1])
            else { return nil }
            ranges = KeyedRange.intersect(low.ranges, high.ranges)
            exact = low.exact && high.exact
        case .in:
            guard case .aggregate(let elements) = constant else { return nil }
            for element in elements {
                if case .aggregate = element { return nil }
                guard add(RangeBuilder.ranges(type, .equalTo, element)) else { return nil }
            }
        default:
            return nil
        }
        ranges = KeyedRange.normalized(ranges)
        return Candidate(
            attribute: key, ranges: ranges, exact: exact, rank: Candidate.rank(of: ranges), answered: exact ? [comparison] : [],
            hasOwnIndex: hasOwnIndex)
    }

    /// `comparison` with its key path on the left: as it is, or turned around when the key
    /// path is on the right of `==` or an order (`30 < age` is `age > 30`). Nil when neither
    /// side is a key path, or the key path is on the right of another operator.
    static func oriented(_ comparison: ComparisonPredicate) -> (path: FormatKeyPath, op: ComparisonOperator, other: FormatExpression)? {
        if case .keyPath(let left) = comparison.leftExpression { return (left, comparison.operatorType, comparison.rightExpression) }
        guard case .keyPath(let right) = comparison.rightExpression else { return nil }
        let op: ComparisonOperator
        switch comparison.operatorType {
        case .equalTo: op = .equalTo
        case .lessThan: op = .greaterThan
        case .lessThanOrEqualTo: op = .greaterThanOrEqualTo
        case .greaterThan: op = .lessThan
        case .greaterThanOrEqualTo: op = .lessThanOrEqualTo
        default: return nil
        }
        return (right, op, comparison.leftExpression)
    }

    /// Whether a comparison on `relationship` is planned from the store's references: always
    /// without `includesPendingChanges`, where judging a row reads every relationship as the
    /// store's references hold it (spec 0008, Pending changes 3); with it, on any side but a
    /// derived side a registered object holds otherwise than the store's references
    /// (``staleSides``), which the full scan reads through that object.
    func readsFromReferences(_ relationship: RelationshipDescription) -> Bool {
        !request.includesPendingChanges || !staleSides.contains(relationship.name)
    }

    /// The objects an equality (`==`, or `IN` a collection) on a to-one relationship allows,
    /// read from the store's references (a recorded side's `referrers` rows, or a derived
    /// side's targets' own recorded inverse): each constant must be an object (a managed
    /// object or an object ID) of this store — a temporary ID or one of another store refers
    /// to nothing stored. Nil (no plan) for anything else, `nil` constants included.
    func referenceCandidate(
        _ comparison: ComparisonPredicate, _ relationship: RelationshipDescription, _ op: ComparisonOperator, _ other: FormatExpression
    ) -> Candidate? {
        guard !relationship.isToMany, !relationship.isTransient, readsFromReferences(relationship),
            let targets = storedObjects(op, other)
        else { return nil }
        return Candidate(
            attribute: relationship.name, ranges: [], exact: true, rank: Candidate.rank(targets: targets.count), answered: [comparison],
            hasOwnIndex: true, targets: targets)
    }

    /// The objects whose to-many relationship holds one of some objects: `ANY r == obj`,
    /// `ANY r IN {obj, …}`, `r CONTAINS obj` and `obj IN r` — read from the store's
    /// references (the recorded side's `referrers` rows, or each object's own recorded
    /// inverse). Nil for other comparisons.
    func membershipCandidate(_ comparison: ComparisonPredicate) -> Candidate? {
        let key: String
        let targets: [StoredObjectID]?
        switch (comparison.modifier, comparison.operatorType, comparison.leftExpression, comparison.rightExpression) {
        case (.any, .equalTo, .keyPath(let path), let other), (.any, .in, .keyPath(let path), let other):
            guard path.components.count == 1, case .key(let name) = path.components[0] else { return nil }
            key = name
            targets = storedObjects(comparison.operatorType, other)
        case (.direct, .contains, .keyPath(let path), let other):
            guard path.components.count == 1, case .key(let name) = path.components[0] else { return nil }
            key = name
            targets = storedObjects(.equalTo, other)
        case (.direct, .in, let other, .keyPath(let path)):
            guard path.components.count == 1, case .key(let name) = path.components[0] else { return nil }
            key = name
            targets = storedObjects(.equalTo, other)
        default:
            return nil
        }
        guard let relationship = entity.relationshipsByName[key], relationship.isToMany, !relationship.isTransient,
            readsFromReferences(relationship), let targets
        else { return nil }
        return Candidate(
            attribute: key, ranges: [], exact: true, rank: Candidate.rank(targets: targets.count), answered: [comparison],
            hasOwnIndex: true, targets: targets, isMembership: true)
    }

    /// The stored objects of this store an `==` (one object) or `IN` (a collection of
    /// objects) allows: managed objects or object IDs; temporary IDs and other stores' are
    /// left out (they are no stored object). Nil for any other operator or constant.
    func storedObjects(_ op: ComparisonOperator, _ other: FormatExpression) -> [StoredObjectID]? {
        guard let storeUUID, let constant = resolve(other) else { return nil }
        let constants: [PredicateConstant]
        switch (op, constant) {
        case (.equalTo, .object): constants = [constant]
        case (.in, .aggregate(let elements)): constants = elements
        default: return nil
        }
        var targets: Set<StoredObjectID> = []
        for element in constants {
            guard case .object(let identity) = element, let id = identity.value as? ManagedObjectID else { return nil }
            if case .permanent(let store, let primaryKey) = id.storage, store == storeUUID {
                targets.insert(StoredObjectID(entity: id.entityName, primaryKey: primaryKey))
            }
        }
        return targets.sorted()
    }

    /// `SELF == obj`, `obj == SELF` or `SELF IN %@` (Core Data's fetch of objects by ID):
    /// the objects themselves, those of the fetched entity or its sub-entities. Nil for
    /// other comparisons.
    func objectsCandidate(_ comparison: ComparisonPredicate) -> Candidate? {
        let other: FormatExpression
        if case .evaluatedObject = comparison.leftExpression {
            other = comparison.rightExpression
        } else if case .evaluatedObject = comparison.rightExpression, comparison.operatorType == .equalTo {
            other = comparison.leftExpression
        } else {
            return nil
        }
        guard let objects = storedObjects(comparison.operatorType, other) else { return nil }
        let scope = Set(model.selfAndSubentityNames(of: entity.name))
        let targets = objects.filter { scope.contains($0.entity) }
        return Candidate(
            attribute: "SELF", ranges: [], exact: true, rank: Candidate.rank(targets: targets.count), answered: [comparison],
            hasOwnIndex: true, targets: targets)
    }

    /// The entity declaring `relationship` for the fetched entity: it or a superentity.
    func relationshipEntity(for relationship: String) -> String? {
        for owner in [entity.name] + entity.superentityNames
        where model.entity(named: owner)?.relationships.contains(where: { $0.name == relationship }) == true {
            return owner
        }
        return nil
    }

    /// A constant, a `$variable` from the request, or an aggregate of those.
    func resolve(_ expression: FormatExpression) -> PredicateConstant? {
        switch expression {
        case .constant(let constant): return constant
        case .variable(let name): return request.substitutionVariables[name].map(Self.constant)
        case .aggregate(let elements):
            var constants: [PredicateConstant] = []
            for element in elements {
                guard let constant = resolve(element) else { return nil }
                constants.append(constant)
            }
            return .aggregate(constants)
        default: return nil
        }
    }

    /// A substitution variable's value as the predicate evaluator sees it.
    static func constant(_ value: AttributeValue) -> PredicateConstant {
        switch value {
        case .int16(let v): .integer(Int(v))
        case .int32(let v): .integer(Int(v))
        case .int64(let v): .integer(Int(v))
        case .decimal(let v): .decimal(v)
        case .double(let v): .double(v)
        case .float(let v): .double(Double(v))
        case .string(let v): .string(v)
        case .boolean(let v): .bool(v)
        case .date(let v): .date(v)
        case .binaryData(let v): .data(v)
        case .uuid(let v): .uuid(v)
        case .uri(let v): .url(v)
        case .transformable(let v): .data(v)
        }
    }
}

// MARK: - Ranges from comparisons

/// Index ranges, in an attribute's own value type, holding every value that satisfies
/// `attribute op constant` under the predicate language's comparison rules (numbers compare
/// across types, nil equals only nil and orders with nothing).
enum RangeBuilder {
    struct Built {
        var ranges: [KeyedRange]
        /// Whether the ranges hold exactly the matching values.
        var exact: Bool
    }

    static func ranges(_ type: AttributeType, _ op: ComparisonOperator, _ constant: PredicateConstant) -> Built? {
        if case .null = constant {
            // nil == nil; nil orders with nothing.
            return Built(ranges: op == .equalTo ? [.nilValues] : [], exact: true)
        }
        switch type {
        case .int16: return integer(op, constant, min: Int64(Int16.min), max: Int64(Int16.max)) { .int16(Int16($0)) }
        case .int32: return integer(op, constant, min: Int64(Int32.min), max: Int64(Int32.max)) { .int32(Int32($0)) }
        case .int64: return integer(op, constant, min: .min, max: .max) { .int64($0) }
        case .double, .float, .decimal: return real(type, op, constant)
        case .boolean: return boolean(op, constant)
        case .date:
            guard case .date(let date) = constant else { return nil }
            return dates(op, date)
        case .string:
            guard case .string(let string) = constant else { return nil }
            let value = AttributeValue.string(string)
            return ordered(op, value, exact: KeyedBound(value, inclusive: true).isCut == false)
        case .uuid:
            guard op == .equalTo, case .uuid(let uuid) = constant else { return nil }
            return Built(ranges: [.equal(.uuid(uuid))], exact: true)
        case .binaryData:
            guard op == .equalTo, case .data(let data) = constant else { return nil }
            let value = AttributeValue.binaryData(data)
            return Built(ranges: [.equal(value)], exact: !KeyedBound(value, inclusive: true).isCut)
        case .uri:
            // URL equality implies equal absolute strings, which is what the index holds.
            guard op == .equalTo, case .url(let url) = constant else { return nil }
            return Built(ranges: [.equal(.uri(url))], exact: false)
        case .transformable:
            return nil
        }
    }

    /// `value op date` as one range of dates. Dates are keyed by their interval as reals
    /// are (spec 0004 §5), so NaN keys sit beyond the infinite dates: as in ``real(_:_:_:)``,
    /// the open end of a range stops at the infinity on that side, and a NaN date matches
    /// nothing (NaN is unordered). Before, `date > now` found the NaN dates too.
    static func dates(_ op: ComparisonOperator, _ date: Date) -> Built? {
        if date.timeIntervalSinceReferenceDate.isNaN { return Built(ranges: [], exact: true) }
        let lowest = KeyedBound(.date(Date(timeIntervalSinceReferenceDate: -.infinity)), inclusive: true)
        let highest = KeyedBound(.date(Date(timeIntervalSinceReferenceDate: .infinity)), inclusive: true)
        let range: KeyedRange
        switch op {
        case .equalTo: range = .equal(.date(date))
        case .lessThan: range = KeyedRange(lower: lowest, upper: KeyedBound(.date(date), inclusive: false))
        case .lessThanOrEqualTo: range = KeyedRange(lower: lowest, upper: KeyedBound(.date(date), inclusive: true))
        case .greaterThan: range = KeyedRange(lower: KeyedBound(.date(date), inclusive: false), upper: highest)
        case .greaterThanOrEqualTo: range = KeyedRange(lower: KeyedBound(.date(date), inclusive: true), upper: highest)
        default: return nil
        }
        return Built(ranges: range.isEmpty ? [] : [range], exact: true)
    }

    /// `value op bound` as one range of values of the bound's own type.
    static func ordered(_ op: ComparisonOperator, _ bound: AttributeValue, exact: Bool) -> Built? {
        let range: KeyedRange
        switch op {
        case .equalTo: range = .equal(bound)
        case .lessThan: range = KeyedRange(upper: KeyedBound(bound, inclusive: false))
        case .lessThanOrEqualTo: range = KeyedRange(upper: KeyedBound(bound, inclusive: true))
        case .greaterThan: range = KeyedRange(lower: KeyedBound(bound, inclusive: false))
        case .greaterThanOrEqualTo: range = KeyedRange(lower: KeyedBound(bound, inclusive: true))
        default: return nil
        }
        return Built(ranges: range.isEmpty ? [] : [range], exact: exact)
    }

    /// A number constant as the evaluator compares it: integers exactly, doubles as
    /// doubles, decimals as decimals, booleans as 0 and 1.
    enum Number {
        case int(Int64)
        case double(Double)
        case decimal(Decimal)

        init?(_ constant: PredicateConstant) {
            switch constant {
            case .integer(let v): self = .int(Int64(v))
            case .bool(let v): self = .int(v ? 1 : 0)
            case .double(let v): self = .double(v)
            case .decimal(let v): self = .decimal(v)
            default: return nil
            }
        }

        var double: Double {
            switch self {
            case .int(let v): Double(v)
            case .double(let v): v
            case .decimal(let v): NSDecimalNumber(decimal: v).doubleValue
            }
        }
    }

    /// Integer attributes. Integer constants give exact bounds; doubles are compared by the
    /// evaluator as doubles, so bounds round toward the matching side (and widen where
    /// doubles can't tell neighbouring integers apart); decimals widen by one. Bounds
    /// outside the type's range clamp to it, so a range never overflows.
    static func integer(
        _ op: ComparisonOperator, _ constant: PredicateConstant, min: Int64, max: Int64, make: (Int64) -> AttributeValue
    ) -> Built? {
        guard let number = Number(constant) else { return nil }
        // The integers i with `i op number`, as [low, high] (nil: unbounded), and exactness.
        var low: Int64?
        var high: Int64?
        var exact = true
        switch number {
        case .int(let v):
            switch op {
            case .equalTo: low = v; high = v
            case .lessThan: if v == .min { return Built(ranges: [], exact: true) } else { high = v - 1 }
            case .lessThanOrEqualTo: high = v
            case .greaterThan: if v == .max { return Built(ranges: [], exact: true) } else { low = v + 1 }
            case .greaterThanOrEqualTo: low = v
            default: return nil
            }
        case .double, .decimal:
            let d = number.double
            if d.isNaN { return Built(ranges: [], exact: true) }
            // Below 2^52 a double holds every integer and its fraction: exact thresholds.
            let precise: Bool
            if case .double = number { precise = abs(d) < 4_503_599_627_370_496 } else { precise = false }
            // Otherwise widen: decimals are compared exactly but converted here through a
            // double; beyond 2^52 doubles can't tell neighbouring integers apart.
            let margin: Double = precise ? 0 : 2 + abs(d) * 1e-9
            exact = precise
            func clamp(_ x: Double) -> Int64? {
                if x.isNaN { return nil }
                if x >= 9_223_372_036_854_775_808.0 { return .max }
                if x < -9_223_372_036_854_775_808.0 { return .min }
                return Int64(x)
            }
            switch op {
            case .equalTo:
                if precise {
                    guard d.rounded() == d, let v = clamp(d) else { return Built(ranges: [], exact: true) }
                    low = v; high = v
                } else {
                    low = clamp((d - margin).rounded(.down)); high = clamp((d + margin).rounded(.up))
                }
            case .lessThan:
                if d == .infinity { break }
                if d == -.infinity { return Built(ranges: [], exact: true) }
                high = precise ? clamp(d.rounded(.up) - 1) : clamp((d + margin).rounded(.up))
            case .lessThanOrEqualTo:
                if d == .infinity { break }
                if d == -.infinity { return Built(ranges: [], exact: true) }
                high = precise ? clamp(d.rounded(.down)) : clamp((d + margin).rounded(.up))
            case .greaterThan:
                if d == -.infinity { break }
                if d == .infinity { return Built(ranges: [], exact: true) }
                low = precise ? clamp(d.rounded(.down) + 1) : clamp((d - margin).rounded(.down))
            case .greaterThanOrEqualTo:
                if d == -.infinity { break }
                if d == .infinity { return Built(ranges: [], exact: true) }
                low = precise ? clamp(d.rounded(.up)) : clamp((d - margin).rounded(.down))
            default:
                return nil
            }
        }
        // Clamp to the attribute type.
        if let l = low, l > max { return Built(ranges: [], exact: true) }
        if let h = high, h < min { return Built(ranges: [], exact: true) }
        if let l = low, l <= min { low = nil }
        if let h = high, h >= max { high = nil }
        let range = KeyedRange(
            lower: low.map { KeyedBound(make($0), inclusive: true) }, upper: high.map { KeyedBound(make($0), inclusive: true) })
        return Built(ranges: range.isEmpty ? [] : [range], exact: exact)
    }

    /// Double, float and decimal attributes, indexed by their value as a double. Doubles
    /// and integers compare exactly as doubles; decimal constants (compared as decimals)
    /// and float or decimal attributes get bounds widened outward, the candidates re-checked.
    static func real(_ type: AttributeType, _ op: ComparisonOperator, _ constant: PredicateConstant) -> Built? {
        guard let number = Number(constant) else { return nil }
        let d = number.double
        if d.isNaN { return Built(ranges: [], exact: true) }
        var exact = type == .double
        if case .decimal = number { exact = false }
        // How far to widen a bound: none when exact, else a relative margin that covers
        // double rounding of decimals.
        func widened(_ x: Double, up: Bool) -> Double {
            if exact || x.isInfinite { return x }
            let margin = Swift.max(abs(x) * 1e-9, Double.leastNormalMagnitude)
            return up ? x + margin : x - margin
        }
        func bound(_ x: Double, inclusive: Bool, up: Bool) -> KeyedBound {
            let value = widened(x, up: up)
            switch type {
            case .float:
                // The float nearest on the safe side.
                var f = Float(value)
                if up, Double(f) < value { f = f.nextUp }
                if !up, Double(f) > value { f = f.nextDown }
                return KeyedBound(.float(f), inclusive: inclusive || Double(f) != x)
            case .decimal:
                // Decimals are indexed by their double; zero is exactly zero either way.
                // (Decimal(Double) traps on infinities; beyond its range it is NaN.)
                let decimal = x == 0 ? Decimal(0) : (value.isFinite ? Decimal(value) : Decimal.nan)
                return KeyedBound(decimal.isNaN ? .double(value) : .decimal(decimal), inclusive: true)
            default:
                return KeyedBound(.double(value), inclusive: inclusive || value != x)
            }
        }
        // NaN is unordered (every comparison with it is false), but its keys sit in the real
        // tag beyond the infinities (-NaN before -∞, NaN after +∞; spec 0004 §5): so the open
        // end of a range stops at the infinity on that side, which it includes.
        let lowest = bound(-.infinity, inclusive: true, up: false)
        let highest = bound(.infinity, inclusive: true, up: true)
        let range: KeyedRange
        switch op {
        case .equalTo: range = KeyedRange(lower: bound(d, inclusive: true, up: false), upper: bound(d, inclusive: true, up: true))
        case .lessThan: range = KeyedRange(lower: lowest, upper: bound(d, inclusive: false, up: true))
        case .lessThanOrEqualTo: range = KeyedRange(lower: lowest, upper: bound(d, inclusive: true, up: true))
        case .greaterThan: range = KeyedRange(lower: bound(d, inclusive: false, up: false), upper: highest)
        case .greaterThanOrEqualTo: range = KeyedRange(lower: bound(d, inclusive: true, up: false), upper: highest)
        default: return nil
        }
        return Built(ranges: range.isEmpty ? [] : [range], exact: exact)
    }

    /// Boolean attributes compare as 0 and 1: the ranges are the values (of two) that match.
    static func boolean(_ op: ComparisonOperator, _ constant: PredicateConstant) -> Built? {
        guard let number = Number(constant) else { return nil }
        if case .decimal = number { return nil }
        let d = number.double
        func holds(_ x: Double) -> Bool {
            switch op {
            case .equalTo: x == d
            case .lessThan: x < d
            case .lessThanOrEqualTo: x <= d
            case .greaterThan: x > d
            case .greaterThanOrEqualTo: x >= d
            default: false
            }
        }
        guard [.equalTo, .lessThan, .lessThanOrEqualTo, .greaterThan, .greaterThanOrEqualTo].contains(op) else { return nil }
        var ranges: [KeyedRange] = []
        if holds(0) { ranges.append(.equal(.boolean(false))) }
        if holds(1) { ranges.append(.equal(.boolean(true))) }
        return Built(ranges: ranges, exact: true)
    }
}
