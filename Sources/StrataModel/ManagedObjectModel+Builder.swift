// MARK: - Building

extension ManagedObjectModel {
    /// Builds a model from a builder block and checks it.
    ///
    /// Throws ``ModelError`` listing every problem ``validate()`` finds.
    ///
    /// ```swift
    /// let model = try ManagedObjectModel(versionIdentifiers: ["1.0"]) {
    ///     Entity("Run") { Attribute("processID", .int32, default: -1) }
    /// }
    /// ```
    public init(versionIdentifiers: Set<String> = [], @ModelBuilder _ content: () -> [ModelMember]) throws(ModelError) {
        var entities: [EntityDescription] = []
        var templates: [FetchRequestTemplate] = []
        var localization: [String: String] = [:]
        for member in content() {
            switch member {
            case .entity(let e): entities.append(e)
            case .fetchRequestTemplate(let t): templates.append(t)
            case .localization(let entries): localization.merge(entries) { _, new in new }
            }
        }
        try self.init(
            entities: entities, fetchRequestTemplates: templates, localizationDictionary: localization,
            versionIdentifiers: versionIdentifiers)
    }
}
