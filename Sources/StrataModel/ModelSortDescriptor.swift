// MARK: - ModelSortDescriptor

/// One sort key of a fetch the model describes: a fetched property's order (Core Data's
/// `NSSortDescriptor` in an `NSFetchedPropertyDescription`'s `fetchRequest`).
///
/// The options are those of the library's fetch sort descriptor: `ascending` (default),
/// `caseInsensitive` (`caseInsensitiveCompare:`), `diacriticInsensitive`, `numeric`
/// (runs of digits compared as numbers).
///
/// ```swift
/// FetchedProperty("roster", entity: "Player", predicate: "team == $FETCH_SOURCE",
///                 sortDescriptors: [ModelSortDescriptor("age", ascending: false), ModelSortDescriptor("name")])
/// ```
public struct ModelSortDescriptor: Sendable, Hashable, Codable {
    /// The key path sorted by, from the fetched entity (`"age"`, `"team.name"`).
    public var key: String
    /// Ascending (the default) or descending.
    public var ascending: Bool
    /// Compare strings ignoring case.
    public var caseInsensitive: Bool
    /// Compare strings ignoring diacritics.
    public var diacriticInsensitive: Bool
    /// Compare runs of digits in strings by their numeric value.
    public var numeric: Bool

    /// Creates a sort key.
    ///
    /// ```swift
    /// ModelSortDescriptor("name", caseInsensitive: true)
    /// ```
    public init(_ key: String, ascending: Bool = true, caseInsensitive: Bool = false, diacriticInsensitive: Bool = false, numeric: Bool = false) {
        self.key = key
        self.ascending = ascending
        self.caseInsensitive = caseInsensitive
        self.diacriticInsensitive = diacriticInsensitive
        self.numeric = numeric
    }

    private enum CodingKeys: String, CodingKey { case key, ascending, caseInsensitive, diacriticInsensitive, numeric }

    /// Decodes a sort key; options left out take their defaults.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            try c.decode(String.self, forKey: .key),
            ascending: try c.decodeIfPresent(Bool.self, forKey: .ascending) ?? true,
            caseInsensitive: try c.decodeIfPresent(Bool.self, forKey: .caseInsensitive) ?? false,
            diacriticInsensitive: try c.decodeIfPresent(Bool.self, forKey: .diacriticInsensitive) ?? false,
            numeric: try c.decodeIfPresent(Bool.self, forKey: .numeric) ?? false)
    }
}
