public import Foundation
public import StrataPredicate
public import StrataModel

/// A sort by the value at a key path (Core Data's `NSSortDescriptor`; named so it can't
/// collide with Foundation's `SortDescriptor`).
///
/// ```swift
/// FetchSortDescriptor(key: "lastName", ascending: true)
/// ```
///
/// Nil sorts before every value in ascending order (after every value descending). Strings
/// compare by Unicode scalar values; ``caseInsensitive`` and ``diacriticInsensitive`` fold
/// both strings first, as a predicate's `[c]` and `[d]` do (so a sort agrees with `<[c]`).
/// Custom classes can name the property with a Swift key path:
///
/// ```swift
/// FetchSortDescriptor(\Person.lastName)
/// ```
public struct FetchSortDescriptor: Sendable, Hashable {
    /// The key path sorted by (a model key path such as `"team.name"`; empty until a Swift
    /// key path is resolved at fetch time).
    public var key: String
    /// Ascending (default) or descending.
    public var ascending: Bool
    /// Compare strings ignoring case (`caseInsensitiveCompare:`): both folded as `[c]`
    /// folds them in a predicate (`"ß"` is `"ss"`), then in Unicode order.
    public var caseInsensitive: Bool
    /// Compare strings ignoring diacritics (`é` sorts with `e`), folded as `[d]` folds them.
    public var diacriticInsensitive: Bool = false
    /// Compare runs of ASCII digits in strings by their numeric value, so "Item 2" sorts
    /// before "Item 10"; the text between them in Unicode order.
    public var numeric: Bool = false
    /// The Swift key path given instead of `key`, resolved against the model at fetch time.
    let swiftKeyPath: SwiftKeyPath?

    /// Creates a sort descriptor over a model key path.
    public init(key: String, ascending: Bool = true, caseInsensitive: Bool = false, diacriticInsensitive: Bool = false, numeric: Bool = false) {
        self.key = key
        self.ascending = ascending
        self.caseInsensitive = caseInsensitive
        self.diacriticInsensitive = diacriticInsensitive
        self.numeric = numeric
        swiftKeyPath = nil
    }

    /// The sort Core Data apps ask for with `NSString.localizedStandardCompare(_:)`
    /// ("Finder-like"): strings compared ignoring case, with runs of digits compared as
    /// numbers ("file2" before "File10"). Strata compares without a locale, so the order is
    /// the same on every machine; Core Data's follows the user's locale.
    ///
    /// ```swift
    /// request.sortDescriptors = [.localizedStandard(key: "title")]
    /// ```
    public static func localizedStandard(key: String, ascending: Bool = true) -> FetchSortDescriptor {
        FetchSortDescriptor(key: key, ascending: ascending, caseInsensitive: true, numeric: true)
    }

    /// Creates a sort descriptor comparing by the method Core Data's
    /// `NSSortDescriptor(key:ascending:selector:)` names — written as its Objective-C name,
    /// since Swift on Linux has no `#selector`:
    ///
    /// | `selector` | compares |
    /// | --- | --- |
    /// | `"compare:"` | as ``init(key:ascending:caseInsensitive:diacriticInsensitive:numeric:)`` does |
    /// | `"caseInsensitiveCompare:"`, `"localizedCaseInsensitiveCompare:"`, `"localizedCompare:"` | strings ignoring case |
    /// | `"localizedStandardCompare:"` | as ``localizedStandard(key:ascending:)`` does |
    ///
    /// Strata compares without a locale, so the localized comparisons give the same order on
    /// every machine: `"localizedCompare:"` puts "apple" before "Banana" as a locale does
    /// (plain `compare:` puts capitals first), but breaks no ties by case.
    ///
    /// ```swift
    /// request.sortDescriptors = [try FetchSortDescriptor(key: "lastName", ascending: true, selector: "localizedCaseInsensitiveCompare:")]
    /// ```
    ///
    /// - Throws: ``ContextError/invalidArgument(_:)`` for any other selector, naming the ones
    ///   supported (Core Data's SQLite store refuses custom selectors at fetch too).
    public init(key: String, ascending: Bool = true, selector: String) throws {
        switch selector {
        case "compare:": self.init(key: key, ascending: ascending)
        case "caseInsensitiveCompare:", "localizedCaseInsensitiveCompare:", "localizedCompare:":
            self.init(key: key, ascending: ascending, caseInsensitive: true)
        case "localizedStandardCompare:": self = .localizedStandard(key: key, ascending: ascending)
        default:
            throw ContextError.invalidArgument(
                "the sort descriptor on '\(key)' names the selector '\(selector)'; Strata sorts by compare:, caseInsensitiveCompare:, localizedCompare:, localizedCaseInsensitiveCompare: or localizedStandardCompare:")
        }
    }

    /// Creates a sort descriptor over a typed property of a custom class, such as
    /// `\Person.age`; the property must read its value through `value(forKey:)`.
    public init<Root: ManagedObject, Value>(
        _ keyPath: any KeyPath<Root, Value> & Sendable, ascending: Bool = true, caseInsensitive: Bool = false,
        diacriticInsensitive: Bool = false, numeric: Bool = false
    ) {
        key = ""
        self.ascending = ascending
        self.caseInsensitive = caseInsensitive
        self.diacriticInsensitive = diacriticInsensitive
        self.numeric = numeric
        swiftKeyPath = SwiftKeyPath(keyPath)
    }

    /// Whether strings compare by plain scalar order (so an index's order serves the sort).
    var usesPlainOrder: Bool { !caseInsensitive && !diacriticInsensitive && !numeric }

    static func compareValues(_ x: Any?, _ y: Any?, caseInsensitive: Bool, diacriticInsensitive: Bool = false, numeric: Bool = false) -> ComparisonResult {
        switch (x, y) {
        case (nil, nil): return .orderedSame
        case (nil, _): return .orderedAscending
        case (_, nil): return .orderedDescending
        case (let a as String, let b as String):
            var options: String.CompareOptions = []
            if caseInsensitive { options.insert(.caseInsensitive) }
            if diacriticInsensitive { options.insert(.diacriticInsensitive) }
            if numeric { options.insert(.numeric) }
            if !options.isEmpty { return compareStrings(a, b, options) }
            return a < b ? .orderedAscending : (a == b ? .orderedSame : .orderedDescending)
        case (let a as Date, let b as Date):
            // By interval, a NaN date after every date as a NaN number is after every number
            // (before, `<` and `==` both false made a NaN date "after" every date and every
            // date "after" it: no order, so sorts and min/max depended on where it stood).
            return compareNumbers(a.timeIntervalSinceReferenceDate, b.timeIntervalSinceReferenceDate)
        case (let a as Bool, let b as Bool): return a == b ? .orderedSame : (!a ? .orderedAscending : .orderedDescending)
        default:
            if let a = SortNumber(x), let b = SortNumber(y) { return SortNumber.compare(a, b) }
            let a = describedForOrder(x), b = describedForOrder(y)
            return a < b ? .orderedAscending : (a == b ? .orderedSame : .orderedDescending)
        }
    }

    /// A value of a kind no other rule orders, as text: its description — a date at NaN as
    /// `"nan"`, since Foundation's `Date.description` traps on it (before, sorting a NaN date
    /// against a value of another kind crashed the process).
    static func describedForOrder(_ value: Any?) -> String {
        if let date = value as? Date, date.timeIntervalSinceReferenceDate.isNaN { return "nan" }
        return String(describing: value ?? "")
    }

    /// Strings under a sort's options, by the predicate language's folding rule (spec 0003):
    /// `[c]`/`[d]` fold both strings first, then they compare as without options — in
    /// Unicode order, with runs of ASCII digits by value under `numeric`. So a sort agrees
    /// with `<[c]` and `<[cd]`: the strings a fetch sorted case-insensitively puts before
    /// `s` are those `name <[c] s` selects. Before, `compare(_:options:)` ordered some
    /// strings otherwise: it put "é" before "f" (`<[c]` and the plain order put it after "z").
    static func compareStrings(_ a: String, _ b: String, _ options: String.CompareOptions) -> ComparisonResult {
        let folding = options.intersection([.caseInsensitive, .diacriticInsensitive])
        let (x, y) = folding.isEmpty ? (a, b) : (fold(a, folding), fold(b, folding))
        return compareFolded(x, y, numeric: options.contains(.numeric))
    }

    /// What the descriptor folds strings by before comparing them (empty: nothing).
    var foldingOptions: String.CompareOptions {
        var options: String.CompareOptions = []
        if caseInsensitive { options.insert(.caseInsensitive) }
        if diacriticInsensitive { options.insert(.diacriticInsensitive) }
        return options
    }

    /// `string` folded as a sort with `folding` folds it (``compareStrings(_:_:_:)``).
    static func fold(_ string: String, _ folding: String.CompareOptions) -> String {
        string.folding(options: folding, locale: nil)
    }

    /// Two strings already folded (``fold(_:_:)``), compared as ``compareStrings(_:_:_:)``
    /// compares the strings they were folded from: a sort folds each key once and compares
    /// the folded keys (decorate, sort, undecorate), not both strings at every comparison.
    static func compareFolded(_ x: String, _ y: String, numeric: Bool) -> ComparisonResult {
        if numeric { return numericOrder(x, y) }
        return x < y ? .orderedAscending : (x == y ? .orderedSame : .orderedDescending)
    }

    /// `a` and `b` in runs: runs of ASCII digits compare by value (leading zeros aside), any
    /// other text as strings do; a string that is a prefix of the other, run by run, first.
    static func numericOrder(_ a: String, _ b: String) -> ComparisonResult {
        func runs(_ string: String) -> [(digits: Bool, text: Substring)] {
            var result: [(digits: Bool, text: Substring)] = []
            var start = string.startIndex
            var inDigits: Bool?
            var index = string.startIndex
            while index < string.endIndex {
                let isDigit = string[index].isASCII && string[index].isWholeNumber
                if let current = inDigits, current != isDigit {
                    result.append((current, string[start..<index]))
                    start = index
                }
                inDigits = isDigit
                index = string.index(after: index)
            }
            if let current = inDigits { result.append((current, string[start..<string.endIndex])) }
            return result
        }
        let (left, right) = (runs(a), runs(b))
        for (x, y) in zip(left, right) {
            if x.digits && y.digits {
                let (p, q) = (x.text.drop { $0 == "0" }, y.text.drop { $0 == "0" })
                if p.count != q.count { return p.count < q.count ? .orderedAscending : .orderedDescending }
                if p != q { return p < q ? .orderedAscending : .orderedDescending }
            } else if x.text != y.text {
                // Compared as the strings from here on would be, so text before digits and
                // after them order as the plain order does.
                return x.text < y.text ? .orderedAscending : .orderedDescending
            }
        }
        return left.count == right.count ? .orderedSame : (left.count < right.count ? .orderedAscending : .orderedDescending)
    }

    /// Doubles in sort order: by value, and NaN (of either sign) after every number, equal
    /// to another NaN — a consistent order, where `<` alone is not one.
    static func compareNumbers(_ a: Double, _ b: Double) -> ComparisonResult {
        if a < b { return .orderedAscending }
        if a > b { return .orderedDescending }
        if a == b { return .orderedSame }
        return a.isNaN == b.isNaN ? .orderedSame : (a.isNaN ? .orderedDescending : .orderedAscending)
    }

    /// A number as a Double (for sums and averages; sorts compare ``SortNumber``s).
    static func number(_ value: Any?) -> Double? {
        switch value {
        case let v as Int: Double(v)
        case let v as Int16: Double(v)
        case let v as Int32: Double(v)
        case let v as Int64: Double(v)
        case let v as Double: v
        case let v as Float: Double(v)
        case let v as Decimal: NSDecimalNumber(decimal: v).doubleValue
        default: nil
        }
    }
}

/// Sort keys read once per element — each descriptor's value, and, for a descriptor that
/// folds strings (``FetchSortDescriptor/caseInsensitive``,
/// ``FetchSortDescriptor/diacriticInsensitive``), each string folded once (decorate, sort,
/// undecorate) — compared as ``FetchSortDescriptor/compareValues(_:_:caseInsensitive:diacriticInsensitive:numeric:)``
/// compares the values: the same order, at one fold per key instead of two per comparison.
struct SortKeyTable {
    let descriptors: [FetchSortDescriptor]
    /// Each element's values, one per descriptor.
    let values: [[Any?]]
    /// Each element's string values folded by the descriptors that fold (nil elsewhere);
    /// empty when no descriptor folds.
    private let folded: [[String?]]

    init(_ values: [[Any?]], descriptors: [FetchSortDescriptor]) {
        self.descriptors = descriptors
        self.values = values
        let folds = descriptors.map(\.foldingOptions)
        guard folds.contains(where: { !$0.isEmpty }) else {
            folded = []
            return
        }
        folded = values.map { row in
            zip(row, folds).map { value, folding in
                guard !folding.isEmpty, let string = value as? String else { return nil }
                return FetchSortDescriptor.fold(string, folding)
            }
        }
    }

    /// The elements' positions in sort order; elements the descriptors tie keep their order.
    func stableOrder() -> [Int] {
        values.indices.sorted { a, b in
            switch compare(a, b) {
            case .orderedAscending: true
            case .orderedDescending: false
            case .orderedSame: a < b
            }
        }
    }

    /// Elements `a` and `b` ordered by the descriptors in turn, descending ones reversed;
    /// `.orderedSame` when every descriptor ties them.
    func compare(_ a: Int, _ b: Int) -> ComparisonResult {
        for (index, descriptor) in descriptors.enumerated() {
            let order: ComparisonResult
            if !folded.isEmpty, let x = folded[a][index], let y = folded[b][index] {
                order = FetchSortDescriptor.compareFolded(x, y, numeric: descriptor.numeric)
            } else {
                order = FetchSortDescriptor.compareValues(
                    values[a][index], values[b][index], caseInsensitive: descriptor.caseInsensitive,
                    diacriticInsensitive: descriptor.diacriticInsensitive, numeric: descriptor.numeric)
            }
            if order != .orderedSame {
                return descriptor.ascending ? order : (order == .orderedAscending ? .orderedDescending : .orderedAscending)
            }
        }
        return .orderedSame
    }
}

/// What to fetch (Core Data's `NSFetchRequest<ResultType>`): an entity, a predicate, sort
/// descriptors, offset and limit, and the shape of the results (managed objects, object IDs,
/// dictionaries with aggregates and grouping, or a count). Unsaved inserts, updates and
/// deletes of the context are honoured unless ``includesPendingChanges`` is off. Spec 0008
/// states the semantics.
///
/// `Result` is the class of the objects ``ManagedObjectContext/fetch(_:)`` returns: a
/// custom class (its ``FetchRequestResult/fetchRequest()`` or `FetchRequest<Run>(entityName:)`),
/// or ``ManagedObject`` — what a request made without naming a class is:
///
/// ```swift
/// var request: FetchRequest<Run> = Run.fetchRequest()
/// request.predicate = try FormatPredicate(format: "processID > %@", 100)
/// request.sortDescriptors = [FetchSortDescriptor(key: "date")]
/// request.fetchLimit = 20
/// let runs: [Run] = try context.fetch(request)
///
/// let any = FetchRequest(entityName: "Run")   // FetchRequest<ManagedObject>
/// let objects: [ManagedObject] = try context.fetch(any)
/// ```
///
/// A typed request's objects must be instances of `Result` (or a subclass): the class
/// registered for their entity, or inherited from its nearest superentity with one. The
/// class is registered for the entity named as it at fetch time when it is registered for
/// none (``PersistentStoreCoordinator/register(_:forEntityName:)`` says more); an object of
/// another class makes the fetch throw. The other results (``ManagedObjectContext/count(for:)``,
/// object IDs, dictionaries) are the same for every `Result`.
public struct FetchRequest<Result: ManagedObject>: Sendable {
    /// The entity fetched.
    public var entityName: String
    /// Include objects of sub-entities (default true).
    public var includesSubentities = true
    /// The filter; nil for every object.
    public var predicate: FormatPredicate?
    /// Values for the predicate's `$variables`.
    public var substitutionVariables: [String: AttributeValue] = [:]
    /// The order; empty for store order.
    public var sortDescriptors: [FetchSortDescriptor] = []
    /// At most this many results (0: no limit).
    public var fetchLimit = 0
    /// Skip this many results first.
    public var fetchOffset = 0
    /// Honour the context's unsaved inserts, updates and deletes (default true). When false,
    /// the store's saved state decides which objects match (Core Data's rule).
    public var includesPendingChanges = true
    /// An in-memory filter applied after `predicate` (a Swift closure or a `#Predicate` that
    /// can't be translated); it can't use an index.
    var memoryFilter: (@Sendable (ManagedObject) throws -> Bool)?
    /// A Foundation `#Predicate` given for a custom class, translated at fetch time.
    var swiftPredicate: SwiftPredicate?
    /// The custom class the request was made for (`Result`, ``FetchRequestResult/fetchRequest()``,
    /// ``ManagedObjectContext/fetch(_:as:)``): registered at fetch time for the entity named
    /// as it, if it is registered for none (``PersistentStoreCoordinator/registerByName(_:)``).
    var resultClass: ManagedObject.Type?

    /// What the fetch returns (default: managed objects).
    public var resultType: FetchResultType = .managedObject
    /// Return the objects in batches of this size (0: all at once): the first batch
    /// carries its values, the others are faults whose values are read a batch at a time
    /// when one of them fires (`fetchBatchSize`).
    public var fetchBatchSize = 0
    /// Return objects as faults (default true); false loads their values and calls
    /// `awakeFromFetch` during the fetch (`returnsObjectsAsFaults`).
    public var returnsObjectsAsFaults = true
    /// Read the objects' values with the fetch (default true); false returns bare faults
    /// that read the store when fired (`includesPropertyValues`).
    public var includesPropertyValues = true
    /// Whether objects the context has loaded already get the values the fetch reads
    /// (`shouldRefreshRefetchedObjects`, default false).
    ///
    /// By default a fetch returns an object the context holds with the values it has —
    /// those it read or saved last — even when another context or process has saved new
    /// ones since (the object keeps its snapshot until it is refreshed or a merge brings the
    /// change). With `true`, each such object is refreshed as
    /// ``ManagedObjectContext/refresh(_:mergeChanges:)`` with `mergeChanges: true` does: the
    /// store's values replace its committed ones, its unsaved changes and transient values
    /// stay on top, `awakeFromFetch()` then `awake(fromSnapshotEvents: .refresh)` run, and it
    /// is reported refreshed. Faults get the fetched values either way. Ignored when
    /// ``includesPropertyValues`` is off.
    public var shouldRefreshRefetchedObjects = false
    /// Relationship key paths whose destinations are read with the fetch, so firing them
    /// needs no further store read (`relationshipKeyPathsForPrefetching`).
    public var relationshipKeyPathsForPrefetching: [String] = []
    /// The properties and aggregate expressions of dictionary results; nil for every
    /// attribute (`propertiesToFetch`).
    public var propertiesToFetch: [PropertyToFetch]?
    /// The key paths dictionary results are grouped by (`propertiesToGroupBy`).
    public var propertiesToGroupBy: [String]?
    /// A filter on grouped dictionary results; it may name the fetched expressions
    /// (`havingPredicate`).
    public var havingPredicate: FormatPredicate?
    /// Drop duplicate dictionary results (`returnsDistinctResults`).
    public var returnsDistinctResults = false
    /// The stores searched; nil for every store of the coordinator (`affectedStores`).
    public var affectedStores: [PersistentStore]?

    /// Every init ends here: the parts given, and `Result` as the request's class unless it
    /// is ``ManagedObject`` (registered at fetch time, as ``FetchRequestResult/fetchRequest()``'s is).
    init(making entityName: String, predicate: FormatPredicate?, sortDescriptors: [FetchSortDescriptor]) {
        self.entityName = entityName
        self.predicate = predicate
        self.sortDescriptors = sortDescriptors
        if ObjectIdentifier(Result.self) != ObjectIdentifier(ManagedObject.self) { resultClass = Result.self }
    }

    /// A request for every object of `entityName`, fetched as `Result`
    /// (`NSFetchRequest<Employee>(entityName:)`).
    ///
    /// ```swift
    /// let request = FetchRequest<Employee>(entityName: "Employee")
    /// let employees = try context.fetch(request)   // [Employee]
    /// ```
    public init(entityName: String, predicate: FormatPredicate? = nil, sortDescriptors: [FetchSortDescriptor] = []) {
        self.init(making: entityName, predicate: predicate, sortDescriptors: sortDescriptors)
    }

    /// A request fetched as `Result`, filtered by a format string with `%@`/`%K` arguments.
    ///
    /// ```swift
    /// let request = try FetchRequest<Post>(entityName: "Post", format: "creationDate > %@", cutoff)
    /// ```
    public init(entityName: String, format: String, _ arguments: Any...) throws {
        self.init(making: entityName, predicate: try FormatPredicate(format: format, argumentArray: arguments), sortDescriptors: [])
    }

    /// A request filtered by a Foundation `#Predicate` over a custom class, fetched as that
    /// class. The forms spec 0008 lists are translated (and can use indexes); any other
    /// predicate is evaluated in memory on each candidate object.
    ///
    /// ```swift
    /// let request = FetchRequest(entityName: "Person", predicate: #Predicate<Person> { $0.age >= 100 && $0.age <= 200 })
    /// let people = try context.fetch(request)   // [Person]
    /// ```
    public init(entityName: String, predicate: Predicate<Result>, sortDescriptors: [FetchSortDescriptor] = []) {
        self.init(making: entityName, predicate: nil, sortDescriptors: sortDescriptors)
        swiftPredicate = SwiftPredicate(predicate)
        resultClass = Result.self
    }

    /// This request as a `FetchRequest<Other>`: every part the same (its class to register
    /// too), only the static type of its objects differs. The context's fetch machinery
    /// runs `FetchRequest<ManagedObject>`s (``erased``).
    func retyped<Other: ManagedObject>(as _: Other.Type) -> FetchRequest<Other> {
        var other = FetchRequest<Other>(making: entityName, predicate: predicate, sortDescriptors: sortDescriptors)
        other.includesSubentities = includesSubentities
        other.substitutionVariables = substitutionVariables
        other.fetchLimit = fetchLimit
        other.fetchOffset = fetchOffset
        other.includesPendingChanges = includesPendingChanges
        other.memoryFilter = memoryFilter
        other.swiftPredicate = swiftPredicate
        other.resultClass = resultClass
        other.resultType = resultType
        other.fetchBatchSize = fetchBatchSize
        other.returnsObjectsAsFaults = returnsObjectsAsFaults
        other.includesPropertyValues = includesPropertyValues
        other.shouldRefreshRefetchedObjects = shouldRefreshRefetchedObjects
        other.relationshipKeyPathsForPrefetching = relationshipKeyPathsForPrefetching
        other.propertiesToFetch = propertiesToFetch
        other.propertiesToGroupBy = propertiesToGroupBy
        other.havingPredicate = havingPredicate
        other.returnsDistinctResults = returnsDistinctResults
        other.affectedStores = affectedStores
        return other
    }

    /// The request as the untyped `FetchRequest<ManagedObject>` the context runs.
    var erased: FetchRequest<ManagedObject> {
        if let same = self as? FetchRequest<ManagedObject> { return same }
        return retyped(as: ManagedObject.self)
    }

    /// Keeps only the objects `isIncluded` accepts, evaluated in memory after `predicate`
    /// (Core Data's block predicates). The closure runs inside the context's isolation.
    public mutating func filter(_ isIncluded: @escaping @Sendable (ManagedObject) throws -> Bool) {
        if let existing = memoryFilter {
            memoryFilter = { try existing($0) && isIncluded($0) }
        } else {
            memoryFilter = isIncluded
        }
    }
}

extension FetchRequest where Result == ManagedObject {
    /// A request for every object of `entityName`, as plain ``ManagedObject``s (Core Data's
    /// `NSFetchRequest<NSManagedObject>(entityName:)`): what `FetchRequest(entityName:)`
    /// makes when no class is named. Objects of a registered custom class are still
    /// instances of it.
    ///
    /// ```swift
    /// let request = FetchRequest(entityName: "Run", sortDescriptors: [FetchSortDescriptor(key: "date")])
    /// let runs = try context.fetch(request)   // [ManagedObject]
    /// ```
    public init(entityName: String, predicate: FormatPredicate? = nil, sortDescriptors: [FetchSortDescriptor] = []) {
        self.init(making: entityName, predicate: predicate, sortDescriptors: sortDescriptors)
    }

    /// A request for plain ``ManagedObject``s filtered by a format string with `%@`/`%K`
    /// arguments.
    ///
    /// ```swift
    /// let request = try FetchRequest(entityName: "Post", format: "creationDate > %@", cutoff)
    /// ```
    public init(entityName: String, format: String, _ arguments: Any...) throws {
        self.init(making: entityName, predicate: try FormatPredicate(format: format, argumentArray: arguments), sortDescriptors: [])
    }
}

/// What gives every managed object class its typed ``fetchRequest()`` (the role Core Data's
/// `NSFetchRequestResult` plays for managed objects). ``ManagedObject`` conforms, so every
/// subclass does; nothing is to be implemented.
public protocol FetchRequestResult: ManagedObject {}

extension ManagedObject: FetchRequestResult {}

extension FetchRequestResult {
    /// A fetch request for the entity named as this class, typed by it (the
    /// `fetchRequest()` Core Data generates for each class):
    ///
    /// ```swift
    /// let request: FetchRequest<Run> = Run.fetchRequest()
    /// let runs: [Run] = try context.fetch(request)
    /// ```
    ///
    /// Fetching it registers the class for that entity if it is registered for none (as
    /// ``ManagedObject/init(context:)`` does), so the objects are instances of the class
    /// even before any was inserted through it. A class whose entity has another name
    /// declares its own, as Core Data's generated code does, and that one is used:
    ///
    /// ```swift
    /// final class Employee: ManagedObject {
    ///     class func fetchRequest() -> FetchRequest<Employee> { FetchRequest<Employee>(entityName: "Staff") }
    /// }
    /// ```
    public static func fetchRequest() -> FetchRequest<Self> {
        var request = FetchRequest<Self>(entityName: String(describing: self))
        request.resultClass = self
        return request
    }
}

/// What a fetch returns (`NSFetchRequestResultType`).
public enum FetchResultType: Sendable, Hashable {
    /// Managed objects (`managedObjectResultType`).
    case managedObject
    /// Object IDs only (`managedObjectIDResultType`).
    case managedObjectID
    /// One dictionary per object or group (`dictionaryResultType`).
    case dictionary
    /// The number of matching objects (`countResultType`).
    case count
}

/// An entry of ``FetchRequest/propertiesToFetch``: a property (or key path) by name, or an
/// aggregate expression with the name it gets in the result (`NSExpressionDescription`).
public enum PropertyToFetch: Sendable, Hashable, ExpressibleByStringLiteral {
    /// A property or key path such as `"lastName"` or `"team.name"`; a relationship gives
    /// object IDs.
    case property(String)
    /// An aggregate named `name` in the result.
    case expression(name: String, ExpressionFunction, keyPath: String)

    /// A property by name.
    public init(stringLiteral value: String) { self = .property(value) }

    /// The key of this entry in a result dictionary.
    public var name: String {
        switch self {
        case .property(let key): key
        case .expression(let name, _, _): name
        }
    }
}

/// An aggregate over the objects of a group (the functions `NSExpression(forFunction:)`
/// takes in dictionary fetches).
public enum ExpressionFunction: String, Sendable, Hashable, CaseIterable {
    /// The number of non-nil values (`count:`).
    case count
    /// The sum (`sum:`): `Int64` for integers, `Double` for floating point, `Decimal` for decimals.
    case sum
    /// The mean as `Double` (`average:`; `Decimal` for decimals).
    case average
    /// The smallest value, in the attribute's type (`min:`).
    case min
    /// The largest value, in the attribute's type (`max:`).
    case max
}

/// What ``ManagedObjectContext/execute(_:)`` returns, by ``FetchRequest/resultType``.
public enum FetchResult {
    /// Managed objects.
    case objects([ManagedObject])
    /// Object IDs.
    case objectIDs([ManagedObjectID])
    /// Dictionaries (nil values are left out, as Core Data does).
    case dictionaries([[String: any Sendable]])
    /// A count.
    case count(Int)
}

/// A fetched row seen through key-value coding, so predicates and sorts can read it without
/// firing the object's fault. Relationships resolve through the object's context.
struct RowSnapshot: KeyValueCoding, PredicateObjectIdentity {
    let values: [String: PropertyValue]
    let object: ManagedObject

    func value(forKey key: String) -> Any? {
        guard let property = object.info.properties[key] else { return nil }
        if property.isTransient { return object.value(forKey: key) }
        if let value = values[key] { return object.externalValue(value, ordered: property.isOrdered) }
        if property.isRelationship && !property.isRecorded { return object.value(forKey: key) }
        return nil
    }

    var predicateIdentity: any Hashable & Sendable { object.objectID }
}

// MARK: - Templates

extension ManagedObjectModel {
    /// The fetch request template `name` as a request, its `$variables` still open: set
    /// ``FetchRequest/substitutionVariables`` before fetching (`fetchRequestTemplate(forName:)`).
    /// Nil when the model has no such template.
    ///
    /// - Throws: ``ContextError/invalidArgument(_:)`` when the template's predicate doesn't parse.
    public func fetchRequestTemplate(forName name: String) throws -> FetchRequest<ManagedObject>? {
        guard let template = fetchRequestTemplatesByName[name] else { return nil }
        var request = FetchRequest(entityName: template.entityName)
        if let stored = template.predicate {
            guard let predicate = stored.predicate else {
                throw ContextError.invalidArgument(
                    "fetch request template \"\(name)\": its predicate does not parse: \(stored.syntaxError ?? stored.format)")
            }
            request.predicate = predicate
        }
        return request
    }

    /// The fetch request template `name` with its `$variables` replaced
    /// (`fetchRequestFromTemplate(withName:substitutionVariables:)`); nil when the model has
    /// no such template.
    ///
    /// ```swift
    /// let request = try model.fetchRequestFromTemplate(withName: "peopleInAgeRange", substitutionVariables: ["MIN": 100, "MAX": 200])
    /// ```
    ///
    /// - Throws: ``ContextError/invalidArgument(_:)`` naming a variable the predicate uses
    ///   but `substitutionVariables` lacks, or a template that names an unknown entity.
    public func fetchRequestFromTemplate(withName name: String, substitutionVariables: [String: Any]) throws -> FetchRequest<ManagedObject>? {
        let filled: TemplateFetchRequest?
        do {
            filled = try fetchRequestTemplate(named: name, substitutionVariables: substitutionVariables)
        } catch {
            throw ContextError.invalidArgument("fetch request template \"\(name)\": \(error)")
        }
        guard let filled else { return nil }
        return FetchRequest(entityName: filled.entity.name, predicate: filled.predicate)
    }
}

/// A number as a sort compares it (`Specs/0008-fetch-requests.md`, "Sort order"): integers
/// as `Int64` and decimals as `Decimal`, so values a double can't tell apart (integers
/// beyond 2^53, decimals with more than 17 digits) still order; NaN after every number.
enum SortNumber {
    case int(Int64)
    case double(Double)
    case decimal(Decimal)

    init?(_ value: Any?) {
        switch value {
        case let v as Int: self = .int(Int64(v))
        case let v as Int64: self = .int(v)
        case let v as Int32: self = .int(Int64(v))
        case let v as Int16: self = .int(Int64(v))
        case let v as Double: self = .double(v)
        case let v as Float: self = .double(Double(v))
        case let v as Decimal: self = .decimal(v)
        default: return nil
        }
    }

    var isNaN: Bool {
        switch self {
        case .int: false
        case .double(let v): v.isNaN
        case .decimal(let v): v.isNaN
        }
    }

    var double: Double {
        switch self {
        case .int(let v): Double(v)
        case .double(let v): v
        case .decimal(let v): NSDecimalNumber(decimal: v).doubleValue
        }
    }

    /// A total order: numbers by value — integers with integers and decimals exactly, an
    /// integer with a double exactly, a decimal with an integer as decimals, a decimal with
    /// a double as doubles — and every NaN (of either sign) after every number, equal to
    /// each other.
    static func compare(_ a: SortNumber, _ b: SortNumber) -> ComparisonResult {
        let nanA = a.isNaN, nanB = b.isNaN
        if nanA || nanB { return nanA == nanB ? .orderedSame : (nanA ? .orderedDescending : .orderedAscending) }
        switch (a, b) {
        case (.int(let x), .int(let y)): return order(x, y)
        case (.double(let x), .double(let y)): return FetchSortDescriptor.compareNumbers(x, y)
        case (.decimal(let x), .decimal(let y)): return order(x, y)
        case (.int(let x), .double(let y)): return compare(x, y)
        case (.double(let x), .int(let y)): return reversed(compare(y, x))
        case (.int(let x), .decimal(let y)): return order(Decimal(x), y)
        case (.decimal(let x), .int(let y)): return order(x, Decimal(y))
        case (.decimal, .double), (.double, .decimal): return FetchSortDescriptor.compareNumbers(a.double, b.double)
        }
    }

    static func order<T: Comparable>(_ x: T, _ y: T) -> ComparisonResult {
        x < y ? .orderedAscending : (x == y ? .orderedSame : .orderedDescending)
    }

    static func reversed(_ result: ComparisonResult) -> ComparisonResult {
        switch result {
        case .orderedAscending: .orderedDescending
        case .orderedDescending: .orderedAscending
        case .orderedSame: .orderedSame
        }
    }

    /// An integer against a (non-NaN) double, exactly.
    static func compare(_ x: Int64, _ y: Double) -> ComparisonResult {
        // Int64's range is [-2^63, 2^63): doubles outside it order without conversion.
        if y >= 9_223_372_036_854_775_808.0 { return .orderedAscending }
        if y < -9_223_372_036_854_775_808.0 { return .orderedDescending }
        let whole = y.rounded(.down)
        let truncated = Int64(whole)  // exact: whole is integral and in range
        if x != truncated { return order(x, truncated) }
        return whole == y ? .orderedSame : .orderedAscending
    }
}

// MARK: - Sorting objects in memory

extension Sequence where Element: ManagedObject {
    /// The objects ordered by `descriptors`, compared as a fetch compares them (nil first,
    /// case- and diacritic-insensitive where asked, key paths through relationships) — Core
    /// Data's `sortedArray(using:)` on a to-many's set, such as seed 004's team's players
    /// sorted by last name. Objects that compare equal keep their order. Call it inside the
    /// objects' context's `perform`.
    ///
    /// ```swift
    /// let players = (team.value(forKey: "players") as? Set<ManagedObject>) ?? []
    /// let roster = players.sorted(using: [FetchSortDescriptor(key: "lastName"), FetchSortDescriptor(key: "firstName")])
    /// ```
    public func sorted(using descriptors: [FetchSortDescriptor]) -> [Element] {
        let objects = Array(self)
        // Swift key paths (`\Player.lastName`) name their property through the model; one
        // that doesn't return a model property's value (a computed `-rank`, a property of
        // a class the objects aren't) is read on each object, as Swift sorts by it (before,
        // it sorted by the property it read, or left the order alone).
        let resolver = descriptors.contains(where: { $0.swiftKeyPath != nil }) ? objects.first?.core.map { KeyPathResolver(core: $0) } : nil
        let readers: [(ManagedObject) -> Any?] = descriptors.map { descriptor in
            guard let keyPath = descriptor.swiftKeyPath else { return { $0.value(forKeyPath: descriptor.key) } }
            if let resolver, let first = objects.first,
                let path = try? resolver.resolve(keyPath.keyPath, from: first.entity.name).path
            {
                return { $0.value(forKeyPath: path) }
            }
            return { object in
                guard let value = object[keyPath: keyPath.keyPath as AnyKeyPath] else { return nil }
                let unwrapped = PredicateTranslator.unwrap(value)
                return unwrapped is NSNull ? nil : unwrapped
            }
        }
        // Each object's keys read once (before session 30, a sort by model key paths read
        // them, and folded strings, at every comparison).
        let keys = SortKeyTable(objects.map { object in readers.map { $0(object) } }, descriptors: descriptors)
        return keys.stableOrder().map { objects[$0] }
    }
}
