// MARK: - KeyValueCoding

/// A value that answers key-value coding questions (Core Data's `NSKeyValueCoding`).
///
/// Predicates read the properties of the objects they evaluate through this protocol.
/// Strata's managed objects conform; `[String: Any]` conforms so dictionaries can be
/// evaluated directly. Return `nil` for an unknown key or a property with no value.
///
/// The protocol extension adds ``value(forKeyPath:)``, which walks dotted key paths,
/// maps through to-many collections and applies collection operators, as
/// `NSObject.value(forKeyPath:)` does.
///
/// ```swift
/// let employee: [String: Any] = ["name": "Ada", "department": ["name": "R&D"]]
/// employee.value(forKeyPath: "department.name")  // "R&D"
/// ```
public protocol KeyValueCoding {
    /// The value of the property named `key`, or nil (Core Data's `value(forKey:)`).
    ///
    /// Return nil for a key the receiver doesn't know; predicates treat it as a nil value.
    ///
    /// ```swift
    /// func value(forKey key: String) -> Any? { key == "name" ? name : nil }
    /// ```
    func value(forKey key: String) -> Any?

    /// The number of elements of the collection property `key` — what `key.@count` counts
    /// — when the receiver can tell without making them; nil otherwise (the default: the
    /// collection is read with ``value(forKey:)`` and counted).
    ///
    /// A managed object counts a to-many relationship's object IDs, so `members.@count`
    /// in a predicate or a key path makes no object for a member. An answer must equal the
    /// count of ``value(forKey:)``'s collection.
    ///
    /// ```swift
    /// func count(forKey key: String) -> Int? { key == "tags" ? tagIDs.count : nil }
    /// ```
    func count(forKey key: String) -> Int?
}

extension KeyValueCoding {
    /// Nil: the collection is read with ``value(forKey:)`` and counted.
    public func count(forKey key: String) -> Int? { nil }
}

// MARK: - Key paths

extension KeyValueCoding {
    /// The value at a dotted key path (Core Data's `value(forKeyPath:)`).
    ///
    /// Each component is read with ``value(forKey:)``. When a component's value is a
    /// collection (an array or a set), the rest of the path is read from every element and
    /// the results are collected into an array (nested collections are flattened one level,
    /// so `departments.employees.name` is a flat array of names). A component starting with
    /// `@` is a collection operator applied to the collection so far, with the rest of the
    /// path read from each element: `@count`, `@sum`, `@avg`, `@min`, `@max`,
    /// `@distinctUnionOfObjects`, `@unionOfObjects`, `@distinctUnionOfArrays`,
    /// `@unionOfArrays` and `@distinctUnionOfSets`. `@sum` of an empty collection is 0;
    /// `@avg`, `@min` and `@max` of an empty collection are nil. As in Foundation, `@sum`,
    /// `@min` and `@max` leave nil values out and `@avg` counts them as 0 (the mean of 10
    /// and nil is 5); a predicate's `@avg` leaves them out, as a store's average does.
    ///
    /// ```swift
    /// company.value(forKeyPath: "department.employees.@sum.salary")
    /// company.value(forKeyPath: "departments.@count")
    /// ```
    public func value(forKeyPath keyPath: String) -> Any? {
        KeyPathWalker.value(of: self, path: FormatKeyPath(lenient: keyPath), nilsAverageAsZero: true)
    }
}

// MARK: - Dictionaries

/// Dictionaries answer key-value coding questions with their entries (like `NSDictionary`).
///
/// `value(forKey:)` returns the entry for `key`, or nil when there is none.
///
/// ```swift
/// let person: [String: Any] = ["age": 42]
/// try FormatPredicate(format: "age > 40").evaluate(with: person)  // true
/// ```
extension Dictionary: KeyValueCoding where Key == String, Value == Any {
    /// The entry for `key`, or nil (`NSDictionary`'s `value(forKey:)`).
    ///
    /// An entry holding `NSNull` or an optional that is nil reads as nil.
    ///
    /// ```swift
    /// ["a": 1].value(forKey: "a")  // 1
    /// ```
    public func value(forKey key: String) -> Any? {
        guard let entry = self[key] else { return nil }
        return OptionalUnwrapper.flatten(entry)
    }
}
