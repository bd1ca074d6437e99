import Foundation
public import StrataPredicate
public import StrataModel

/// A sort by the value at a key path (Core Data's `NSSortDescriptor`; named so it can't
/// collide with Foundation's `SortDescriptor`).
///
/// ```swift
/// FetchSortDescriptor(key: "lastName", ascending: true)
/// ```
public struct FetchSortDescriptor: Sendable, Hashable {
    /// The key path sorted by.
    public var key: String
    /// Ascending (default) or descending.
    public var ascending: Bool
    /// Compare strings ignoring case.
    public var caseInsensitive: Bool

    /// Creates a sort descriptor.
    public init(key: String, ascending: Bool = true, caseInsensitive: Bool = false) {
        self.key = key
        self.ascending = ascending
        self.caseInsensitive = caseInsensitive
    }

    /// Orders `a` and `b` by `descriptors` in turn; nil sorts first.
    static func compare(_ a: Any, _ b: Any, by descriptors: [FetchSortDescriptor]) throws -> ComparisonResult {
        func value(_ subject: Any, _ key: String) -> Any? { (subject as? any KeyValueCoding)?.value(forKeyPath: key) }
        for descriptor in descriptors {
            let order = compareValues(value(a, descriptor.key), value(b, descriptor.key), caseInsensitive: descriptor.caseInsensitive)
            if order != .orderedSame { return descriptor.ascending ? order : (order == .orderedAscending ? .orderedDescending : .orderedAscending) }
        }
        return .orderedSame
    }

    static func compareValues(_ x: Any?, _ y: Any?, caseInsensitive: Bool) -> ComparisonResult {
        switch (x, y) {
        case (nil, nil): return .orderedSame
        case (nil, _): return .orderedAscending
        case (_, nil): return .orderedDescending
        case (let a as String, let b as String):
            return caseInsensitive ? a.compare(b, options: .caseInsensitive) : (a < b ? .orderedAscending : (a == b ? .orderedSame : .orderedDescending))
        case (let a as Date, let b as Date): return a < b ? .orderedAscending : (a == b ? .orderedSame : .orderedDescending)
        case (let a as Bool, let b as Bool): return a == b ? .orderedSame : (!a ? .orderedAscending : .orderedDescending)
        default:
            if let a = number(x), let b = number(y) { return a < b ? .orderedAscending : (a == b ? .orderedSame : .orderedDescending) }
            let a = String(describing: x ?? ""), b = String(describing: y ?? "")
            return a < b ? .orderedAscending : (a == b ? .orderedSame : .orderedDescending)
        }
    }

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

/// What to fetch (Core Data's `NSFetchRequest`): an entity, an optional predicate, sort
/// descriptors, offset and limit. Unsaved inserts, updates and deletes of the context are
/// honoured.
///
/// ```swift
/// var request = FetchRequest(entityName: "Run")
/// request.sortDescriptors = [FetchSortDescriptor(key: "date")]
/// let runs = try context.fetch(request)
/// ```
public struct FetchRequest: Sendable {
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

    /// A request for every object of `entityName`.
    public init(entityName: String, predicate: FormatPredicate? = nil, sortDescriptors: [FetchSortDescriptor] = []) {
        self.entityName = entityName
        self.predicate = predicate
        self.sortDescriptors = sortDescriptors
    }
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
