// MARK: - ModelLocalization

/// Lookups in a model's localization dictionary.
///
/// Corresponds to Core Data's use of `NSManagedObjectModel.localizationDictionary`, with
/// seed 001's keys:
///
/// | key | value |
/// | --- | --- |
/// | `Entity/<Entity>` | the entity's localized name |
/// | `Property/<property>/Entity/<Entity>` | a property's localized name in one entity |
/// | `Property/<property>` | a property's localized name in every entity |
/// | `ErrorString/<text>` | the localized form of a validation warning |
///
/// A missing key falls back to the name or text itself.
///
/// ```swift
/// let l = model.localization
/// l.propertyName("processID", entity: "Run")  // "Process ID"
/// l.errorString("Process ID < 1")             // "Process ID must not be less than 1"
/// ```
public struct ModelLocalization: Sendable, Hashable {
    /// The dictionary looked up.
    public var dictionary: [String: String]

    /// Creates lookups over `dictionary` (empty: every lookup returns its input).
    ///
    /// ```swift
    /// ModelLocalization(["Entity/Run": "Program run"])
    /// ```
    public init(_ dictionary: [String: String] = [:]) { self.dictionary = dictionary }

    /// The localized name of an entity (`Entity/<name>`), or `name`.
    ///
    /// ```swift
    /// l.entityName("Run")
    /// ```
    public func entityName(_ name: String) -> String { dictionary["Entity/\(name)"] ?? name }

    /// The localized name of a property: `Property/<p>/Entity/<E>`, then `Property/<p>`,
    /// then `property`.
    ///
    /// ```swift
    /// l.propertyName("date", entity: "Run")  // "Date"
    /// ```
    public func propertyName(_ property: String, entity: String? = nil) -> String {
        if let entity, let name = dictionary["Property/\(property)/Entity/\(entity)"] { return name }
        return dictionary["Property/\(property)"] ?? property
    }

    /// The localized form of an error string or validation warning (`ErrorString/<text>`),
    /// or `text`.
    ///
    /// ```swift
    /// l.errorString("Process ID < 1")
    /// ```
    public func errorString(_ text: String) -> String { dictionary["ErrorString/\(text)"] ?? text }
}

// MARK: - Model access

extension ManagedObjectModel {
    /// Lookups in ``localizationDictionary``.
    ///
    /// ```swift
    /// model.localization.entityName("Run")
    /// ```
    public var localization: ModelLocalization { ModelLocalization(localizationDictionary) }
}
