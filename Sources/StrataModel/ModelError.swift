// MARK: - ModelError

/// Everything wrong with a model, found at once.
///
/// Thrown by ``ManagedObjectModel/validate()`` — and so by every way of building or loading
/// a model — with one ``Issue`` per problem. Each issue names the entity and property, and
/// for a model read from a file, the JSON location (`entities[1].relationships[0].inverse`);
/// ``file`` names the file. Core Data reports model mistakes one exception at a time, often
/// only when the store is opened; Strata reports them all when the model is made.
///
/// ```swift
/// do { _ = try ManagedObjectModel(contentsOf: url) }
/// catch let error as ModelError {
///     for issue in error.issues { print(issue) }
///     // Entity 'Player', property 'team' (entities[1].relationships[0].destination):
///     //   destination entity 'Teem' of relationship 'team' does not exist
/// }
/// ```
public struct ModelError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The problems, in model order.
    public var issues: [Issue]
    /// The model file's path, when the model came from a file.
    public var file: String?

    /// Creates an error from issues.
    ///
    /// ```swift
    /// ModelError([ModelError.Issue(.duplicateEntity, entity: "Run", property: nil, message: "…")])
    /// ```
    public init(_ issues: [Issue], file: String? = nil) {
        self.issues = issues
        self.file = file
    }

    /// The kinds of the issues, in order — handy in tests.
    ///
    /// ```swift
    /// error.kinds  // [.unknownDestination, .inverseMismatch]
    /// ```
    public var kinds: [Kind] { issues.map(\.kind) }

    /// One line for the count and file, then one line per issue.
    ///
    /// ```swift
    /// print(error)
    /// ```
    public var description: String {
        let count = issues.count == 1 ? "1 problem" : "\(issues.count) problems"
        let header = "The model\(file.map { " in \($0)" } ?? "") has \(count):"
        return ([header] + issues.map { "  - \($0)" }).joined(separator: "\n")
    }

    // MARK: - Issue

    /// One problem in a model.
    ///
    /// ```swift
    /// issue.kind      // .inverseMismatch
    /// issue.entity    // "Player"
    /// issue.property  // "team"
    /// ```
    public struct Issue: Sendable, Hashable, CustomStringConvertible {
        /// What is wrong.
        public var kind: Kind
        /// The entity concerned (for template and file-level problems, the entity the
        /// template names, or nil).
        public var entity: String?
        /// The property concerned, or nil for entity- and model-level problems.
        public var property: String?
        /// What is wrong, in a sentence, naming the offending names and values.
        public var message: String
        /// The JSON location within the model file (`entities[0].attributes[1].defaultValue`);
        /// the same path is given for models built in code, counting declared entities
        /// and properties.
        public var location: String?

        /// Creates an issue.
        ///
        /// ```swift
        /// ModelError.Issue(.unknownSuperentity, entity: "Manager", property: nil, message: "…")
        /// ```
        public init(_ kind: Kind, entity: String?, property: String?, message: String, location: String? = nil) {
            self.kind = kind
            self.entity = entity
            self.property = property
            self.message = message
            self.location = location
        }

        /// `Entity 'E', attribute 'p' (location): message`.
        ///
        /// ```swift
        /// "\(issue)"
        /// ```
        public var description: String {
            var subject: [String] = []
            if let entity { subject.append("Entity '\(entity)'") }
            if let property { subject.append("property '\(property)'") }
            var text = subject.joined(separator: ", ")
            if let location { text += text.isEmpty ? "At \(location)" : " (\(location))" }
            return text.isEmpty ? message : "\(text): \(message)"
        }
    }

    // MARK: - Kind

    /// The kinds of model problem.
    ///
    /// A `RawRepresentable` string so tests and tools can match kinds stably.
    ///
    /// ```swift
    /// ModelError.Kind.unknownDestination.rawValue  // "unknownDestination"
    /// ```
    public struct Kind: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        /// The kind's stable name.
        public var rawValue: String
        /// Creates a kind from its name.
        public init(rawValue: String) { self.rawValue = rawValue }
        /// The kind's name.
        public var description: String { rawValue }

        /// The model file is not valid JSON or lacks a required member.
        public static let malformedFile = Kind(rawValue: "malformedFile")
        /// The model file's `formatVersion` is newer than this library reads.
        public static let unsupportedFormatVersion = Kind(rawValue: "unsupportedFormatVersion")
        /// A name is empty or contains characters a key path cannot use.
        public static let invalidName = Kind(rawValue: "invalidName")
        /// Two entities share a name.
        public static let duplicateEntity = Kind(rawValue: "duplicateEntity")
        /// Two properties of an entity share a name, or one clashes with an inherited property.
        public static let duplicateProperty = Kind(rawValue: "duplicateProperty")
        /// A superentity name names no entity.
        public static let unknownSuperentity = Kind(rawValue: "unknownSuperentity")
        /// An entity inherits from itself, directly or through others.
        public static let inheritanceCycle = Kind(rawValue: "inheritanceCycle")
        /// A relationship's destination names no entity.
        public static let unknownDestination = Kind(rawValue: "unknownDestination")
        /// A relationship's inverse names no relationship on the destination.
        public static let inverseNotFound = Kind(rawValue: "inverseNotFound")
        /// A relationship's inverse does not name it back, or points at another entity.
        public static let inverseMismatch = Kind(rawValue: "inverseMismatch")
        /// A default value or validation bound does not match the attribute type.
        public static let wrongValueType = Kind(rawValue: "wrongValueType")
        /// A mandatory, persisted attribute of a concrete entity has no default value.
        public static let missingDefaultValue = Kind(rawValue: "missingDefaultValue")
        /// A regular expression does not compile.
        public static let invalidRegularExpression = Kind(rawValue: "invalidRegularExpression")
        /// A predicate does not parse.
        public static let invalidPredicate = Kind(rawValue: "invalidPredicate")
        /// A minimum exceeds its maximum, a count or length is negative, or a rule does not
        /// apply to the attribute's type.
        public static let invalidRange = Kind(rawValue: "invalidRange")
        /// A uniqueness constraint names an unknown, to-many or non-persisted property.
        public static let invalidUniquenessConstraint = Kind(rawValue: "invalidUniquenessConstraint")
        /// An index (``FetchIndexDescription``) has no name or elements, repeats a name or a
        /// property, names an unknown, to-many or non-persisted property, or asks for an
        /// R-tree.
        public static let invalidFetchIndex = Kind(rawValue: "invalidFetchIndex")
        /// A fetched property names an unknown entity.
        public static let invalidFetchedProperty = Kind(rawValue: "invalidFetchedProperty")
        /// A fetch request template is duplicated or names an unknown entity.
        public static let invalidFetchRequestTemplate = Kind(rawValue: "invalidFetchRequestTemplate")
        /// A derived attribute's derivation doesn't parse, isn't a supported shape, names an
        /// unknown key, follows a to-many relationship without an aggregate, gives values of
        /// another type than the attribute's, reads derived attributes in a cycle — or the
        /// attribute is transient, mandatory, defaulted or validated.
        public static let invalidDerivation = Kind(rawValue: "invalidDerivation")
    }
}
