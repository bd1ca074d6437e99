// MARK: - FormatKeyPath

/// A dotted key path such as `manager.lastName` or `employees.@sum.salary` (the key path of
/// Core Data's `NSExpression(forKeyPath:)`).
///
/// The path is split into components once, at parse time, so evaluation never re-splits
/// it. Components are keys or collection operators.
///
/// ```swift
/// let path: FormatKeyPath = "department.employees.@sum.salary"
/// path.components  // [.key("department"), .key("employees"), .collectionOperator(.sum), .key("salary")]
/// ```
public struct FormatKeyPath: Sendable, Hashable, CustomStringConvertible, ExpressibleByStringLiteral {
    /// The components, in order.
    ///
    /// Never empty for a key path produced by the parser.
    ///
    /// ```swift
    /// FormatKeyPath("a.b").components.count  // 2
    /// ```
    public let components: [Component]

    /// One component of a key path: a key, or a collection operator such as `@count`.
    ///
    /// Collection operators apply to the collection read so far, with the remaining
    /// components read from each element.
    ///
    /// ```swift
    /// FormatKeyPath.Component.collectionOperator(.count)
    /// ```
    public enum Component: Sendable, Hashable {
        /// A property name, read with `value(forKey:)`.
        case key(String)
        /// A collection operator (`@count`, `@sum`, …).
        case collectionOperator(CollectionOperator)
    }

    /// A key-value coding collection operator (Core Data's `@count`, `@sum`, … in key paths).
    ///
    /// The raw value is the spelling in a key path, including the `@`.
    ///
    /// ```swift
    /// FormatKeyPath.CollectionOperator(rawValue: "@avg")  // .average
    /// ```
    public enum CollectionOperator: String, Sendable, Hashable, CaseIterable {
        /// The number of elements.
        case count = "@count"
        /// The sum of the numeric values (0 when empty).
        case sum = "@sum"
        /// The arithmetic mean of the numeric values (nil when empty).
        case average = "@avg"
        /// The smallest value (nil when empty).
        case minimum = "@min"
        /// The largest value (nil when empty).
        case maximum = "@max"
        /// The values with duplicates removed, in first-seen order.
        case distinctUnionOfObjects = "@distinctUnionOfObjects"
        /// The values, duplicates kept.
        case unionOfObjects = "@unionOfObjects"
        /// The elements of the collection values, flattened, duplicates removed.
        case distinctUnionOfArrays = "@distinctUnionOfArrays"
        /// The elements of the collection values, flattened.
        case unionOfArrays = "@unionOfArrays"
        /// The elements of the collection values, flattened, duplicates removed.
        case distinctUnionOfSets = "@distinctUnionOfSets"

        /// Looks an operator up by name, ASCII-case-insensitively, with or without the `@`.
        static func named(_ name: String) -> CollectionOperator? {
            let bare = name.hasPrefix("@") ? String(name.dropFirst()) : name
            guard let upper = Lexer.keyword(bare) else { return nil }
            return allCases.first { Lexer.keyword(String($0.rawValue.dropFirst())) == upper }
        }
    }

    /// Creates a key path from components.
    ///
    /// The components are used as given; no validation is done.
    ///
    /// ```swift
    /// let path = FormatKeyPath(components: [.key("employees"), .collectionOperator(.count)])
    /// ```
    public init(components: [Component]) {
        self.components = components
    }

    /// Creates a key path from a dotted string; `@name` components that are known collection
    /// operators become operators, anything else a key.
    ///
    /// The string is not checked against the grammar; use a `%K` argument in a format string
    /// to get a checked key path.
    ///
    /// ```swift
    /// let path = FormatKeyPath("employees.@count")
    /// ```
    public init(_ string: String) {
        self.init(lenient: string)
    }

    /// Creates a key path from a string literal, as ``init(_:)``.
    ///
    /// Convenient in tests and when building syntax trees by hand.
    ///
    /// ```swift
    /// let path: FormatKeyPath = "manager.lastName"
    /// ```
    public init(stringLiteral value: String) {
        self.init(lenient: value)
    }

    init(lenient string: String) {
        components = string.split(separator: ".", omittingEmptySubsequences: false).map { part in
            let text = String(part)
            if text.hasPrefix("@"), let op = CollectionOperator.named(text) {
                return .collectionOperator(op)
            }
            return .key(text)
        }
    }

    /// The key path as a format-string fragment: keys that are reserved words are escaped
    /// with `#`.
    ///
    /// Parses back to an equal key path.
    ///
    /// ```swift
    /// FormatKeyPath(components: [.key("order"), .key("in")]).description  // "order.#in"
    /// ```
    public var description: String {
        components.map { component in
            switch component {
            case .key(let key): Lexer.isReservedWord(key) ? "#" + key : key
            case .collectionOperator(let op): op.rawValue
            }
        }.joined(separator: ".")
    }

    /// The key path as plain dotted text, without `#` escapes.
    ///
    /// Useful for a query planner matching attribute names.
    ///
    /// ```swift
    /// // For the left side of try FormatPredicate(format: "order.#in == 1"):
    /// path.string       // "order.in"
    /// path.description  // "order.#in"
    /// ```
    public var string: String {
        components.map { component in
            switch component {
            case .key(let key): key
            case .collectionOperator(let op): op.rawValue
            }
        }.joined(separator: ".")
    }
}
