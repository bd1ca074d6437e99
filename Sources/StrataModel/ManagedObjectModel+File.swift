public import Foundation

// MARK: - Model files

extension ManagedObjectModel {
    /// The newest model file format version this library reads and writes
    /// (`Specs/0002-model-file.md`). Version 2 added derived attributes (`derivation`),
    /// version 3 fetched properties' `sortDescriptors`; the writer writes the oldest version
    /// that holds the model — 1 for a model without either — so such files are unchanged and
    /// older readers still read them.
    public static let currentFormatVersion = 3

    /// The format version ``jsonData(prettyPrinted:)`` writes for this model: 3 when a
    /// fetched property has sort descriptors, else 2 when an entity has a derived attribute,
    /// else 1.
    ///
    /// ```swift
    /// model.formatVersion  // 1
    /// ```
    public var formatVersion: Int {
        if entities.contains(where: { $0.fetchedProperties.contains { !$0.sortDescriptors.isEmpty } }) { return 3 }
        return entities.contains { $0.attributes.contains(where: \.isDerived) } ? 2 : 1
    }

    /// Loads and checks a JSON model file.
    ///
    /// The Strata counterpart of `NSManagedObjectModel(contentsOf:)` for a compiled `.momd`.
    /// Throws one ``ModelError`` whose ``ModelError/file`` is the file's path and whose
    /// issues give the JSON location of every problem: unreadable file, JSON syntax error
    /// (with line and column), a `formatVersion` newer than ``currentFormatVersion``, unknown
    /// or mistyped members, and everything ``validate()`` checks.
    ///
    /// ```swift
    /// let model = try ManagedObjectModel(contentsOf: URL(fileURLWithPath: "Model.json"))
    /// ```
    public init(contentsOf url: URL) throws(ModelError) {
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            throw ModelError(
                [.init(.malformedFile, entity: nil, property: nil, message: "cannot read the model file: \(error.localizedDescription)")],
                file: url.path)
        }
        do {
            try self.init(jsonData: data)
        } catch {
            var located = error
            located.file = url.path
            throw located
        }
    }

    /// Reads and checks a model from JSON model file bytes.
    ///
    /// ```swift
    /// let model = try ManagedObjectModel(jsonData: Data(json.utf8))
    /// ```
    public init(jsonData: Data) throws(ModelError) {
        let json: JSONValue
        do {
            json = try JSONValue.parse(jsonData)
        } catch {
            throw ModelError([.init(.malformedFile, entity: nil, property: nil, message: error.description)])
        }
        var reader = ModelFileReader()
        let model = try reader.read(json)
        let readerLocations = Set(reader.issues.compactMap(\.location) + reader.placeholderLocations)
        let checked = model.checkingIssues().filter { issue in
            guard let location = issue.location else { return true }
            // A member the reader already rejected is not reported twice.
            return !readerLocations.contains { location == $0 || location.hasPrefix($0 + ".") }
        }
        let all = reader.issues + checked
        if !all.isEmpty { throw ModelError(all) }
        self = model
    }

    /// The model as JSON model file bytes (format ``formatVersion``).
    ///
    /// Output is deterministic: members in a fixed order (`name` first), dictionaries
    /// sorted by key, members with their default value left out, two-space indentation
    /// when `prettyPrinted`, and a final newline — so a saved model diffs cleanly.
    ///
    /// ```swift
    /// let text = String(decoding: model.jsonData(), as: UTF8.self)
    /// ```
    public func jsonData(prettyPrinted: Bool = true) -> Data {
        Data((ModelFileWriter.document(self).serialized(pretty: prettyPrinted) + (prettyPrinted ? "\n" : "")).utf8)
    }

    /// Writes the model file to `url`, atomically.
    ///
    /// ```swift
    /// try model.write(to: URL(fileURLWithPath: "Model.json"))
    /// ```
    public func write(to url: URL) throws {
        try jsonData(prettyPrinted: true).write(to: url, options: .atomic)
    }
}

// MARK: - Writer

/// Turns a model into the file's JSON document; see `Specs/0002-model-file.md`.
enum ModelFileWriter {
    typealias Members = [(key: String, value: JSONValue)]

    static func document(_ model: ManagedObjectModel) -> JSONValue {
        var m: Members = [("formatVersion", .number(String(model.formatVersion)))]
        if !model.versionIdentifiers.isEmpty {
            m.append(("versionIdentifiers", .array(model.versionIdentifiers.sorted().map(JSONValue.string))))
        }
        m.append(("entities", .array(model.entities.map(entity))))
        if !model.fetchRequestTemplates.isEmpty {
            m.append(("fetchRequestTemplates", .array(model.fetchRequestTemplates.map(template))))
        }
        if !model.localizationDictionary.isEmpty { m.append(("localizationDictionary", dictionary(model.localizationDictionary))) }
        return .object(m)
    }

    static func dictionary(_ d: [String: String]) -> JSONValue {
        .object(d.sorted { $0.key < $1.key }.map { ($0.key, JSONValue.string($0.value)) })
    }

    static func add(_ m: inout Members, _ key: String, _ s: String?) { if let s { m.append((key, .string(s))) } }
    static func add(_ m: inout Members, _ key: String, _ b: Bool, default d: Bool) { if b != d { m.append((key, .bool(b))) } }
    static func add(_ m: inout Members, _ key: String, _ n: Int?) { if let n { m.append((key, .number(String(n)))) } }
    static func add(_ m: inout Members, _ key: String, _ v: AttributeValue?) { if let v { m.append((key, v.jsonValue)) } }
    static func addUserInfo(_ m: inout Members, _ d: [String: String]) { if !d.isEmpty { m.append(("userInfo", dictionary(d))) } }

    static func entity(_ e: EntityDescription) -> JSONValue {
        var m: Members = [("name", .string(e.name))]
        if e.managedObjectClassName != e.name { m.append(("className", .string(e.managedObjectClassName))) }
        add(&m, "abstract", e.isAbstract, default: false)
        add(&m, "superentity", e.superentityName)
        add(&m, "renamingIdentifier", e.renamingIdentifier)
        add(&m, "versionHashModifier", e.versionHashModifier)
        addUserInfo(&m, e.userInfo)
        if !e.attributes.isEmpty { m.append(("attributes", .array(e.attributes.map(attribute)))) }
        if !e.relationships.isEmpty { m.append(("relationships", .array(e.relationships.map(relationship)))) }
        if !e.fetchedProperties.isEmpty { m.append(("fetchedProperties", .array(e.fetchedProperties.map(fetched)))) }
        if !e.uniquenessConstraints.isEmpty {
            m.append(("uniquenessConstraints", .array(e.uniquenessConstraints.map { .array($0.map(JSONValue.string)) })))
        }
        if !e.indexes.isEmpty { m.append(("indexes", .array(e.indexes.map(fetchIndex)))) }
        return .object(m)
    }

    static func fetchIndex(_ index: FetchIndexDescription) -> JSONValue {
        let elements: [JSONValue] = index.elements.map { element in
            var m: Members = [("property", .string(element.propertyName))]
            if element.collationType != .binary { m.append(("collationType", .string(element.collationType.rawValue))) }
            add(&m, "ascending", element.isAscending, default: true)
            return .object(m)
        }
        return .object([("name", .string(index.name)), ("elements", .array(elements))])
    }

    static func attribute(_ a: AttributeDescription) -> JSONValue {
        var m: Members = [("name", .string(a.name)), ("type", .string(a.attributeType.name))]
        if case .transformable(let valueType) = a.attributeType { m.append(("valueType", .string(valueType))) }
        add(&m, "derivation", a.derivationExpression?.format)
        add(&m, "optional", a.isOptional, default: true)
        add(&m, "transient", a.isTransient, default: false)
        add(&m, "indexed", a.isIndexed, default: false)
        add(&m, "providedAtInsert", a.isProvidedAtInsert, default: false)
        add(&m, "preservesValueInHistoryOnDeletion", a.preservesValueInHistoryOnDeletion, default: false)
        add(&m, "defaultValue", a.defaultValue)
        add(&m, "minimumValue", a.minimumValue)
        add(&m, "maximumValue", a.maximumValue)
        add(&m, "minimumLength", a.minimumLength)
        add(&m, "maximumLength", a.maximumLength)
        add(&m, "regularExpression", a.regularExpression)
        if !a.validationPredicates.isEmpty {
            m.append((
                "validationPredicates",
                .array(a.validationPredicates.map { .object([("predicate", .string($0.predicate.format)), ("warning", .string($0.warning))]) })
            ))
        }
        add(&m, "renamingIdentifier", a.renamingIdentifier)
        add(&m, "versionHashModifier", a.versionHashModifier)
        addUserInfo(&m, a.userInfo)
        return .object(m)
    }

    static func relationship(_ r: RelationshipDescription) -> JSONValue {
        var m: Members = [("name", .string(r.name)), ("destination", .string(r.destinationEntityName))]
        add(&m, "inverse", r.inverseName)
        add(&m, "toMany", r.isToMany, default: false)
        add(&m, "ordered", r.isOrdered, default: false)
        add(&m, "optional", r.isOptional, default: true)
        add(&m, "transient", r.isTransient, default: false)
        add(&m, "minCount", r.minCount)
        add(&m, "maxCount", r.maxCount)
        if r.deleteRule != .nullify { m.append(("deleteRule", .string(r.deleteRule.rawValue))) }
        add(&m, "renamingIdentifier", r.renamingIdentifier)
        add(&m, "versionHashModifier", r.versionHashModifier)
        addUserInfo(&m, r.userInfo)
        return .object(m)
    }

    static func fetched(_ f: FetchedPropertyDescription) -> JSONValue {
        var m: Members = [("name", .string(f.name)), ("entity", .string(f.entityName)), ("predicate", .string(f.predicate.format))]
        if !f.sortDescriptors.isEmpty { m.append(("sortDescriptors", .array(f.sortDescriptors.map(sortDescriptor)))) }
        add(&m, "renamingIdentifier", f.renamingIdentifier)
        addUserInfo(&m, f.userInfo)
        return .object(m)
    }

    static func sortDescriptor(_ d: ModelSortDescriptor) -> JSONValue {
        var m: Members = [("key", .string(d.key))]
        add(&m, "ascending", d.ascending, default: true)
        add(&m, "caseInsensitive", d.caseInsensitive, default: false)
        add(&m, "diacriticInsensitive", d.diacriticInsensitive, default: false)
        add(&m, "numeric", d.numeric, default: false)
        return .object(m)
    }

    static func template(_ t: FetchRequestTemplate) -> JSONValue {
        var m: Members = [("name", .string(t.name)), ("entity", .string(t.entityName))]
        add(&m, "predicate", t.predicate?.format)
        return .object(m)
    }
}

// MARK: - Reader

/// Reads the file's JSON document into a model, collecting every problem with its JSON
/// location instead of stopping at the first.
struct ModelFileReader {
    var issues: [ModelError.Issue] = []
    /// The document's `formatVersion` (members added by a later version are refused in an
    /// older one).
    var formatVersion = ManagedObjectModel.currentFormatVersion
    /// Locations where the reader put a placeholder in for an item it could not read (so
    /// the items after it keep their indices, and their locations), besides the locations
    /// of its issues; the checker's issues at or under them are not reported.
    var placeholderLocations: [String] = []

    mutating func fail(_ path: String, _ message: String, entity: String? = nil, property: String? = nil) {
        issues.append(.init(.malformedFile, entity: entity, property: property, message: message, location: path))
    }

    /// The members of an object, reporting members not in `allowed` (a typo such as
    /// `"optinal"` must not be silently ignored).
    mutating func object(_ value: JSONValue, _ path: String, _ what: String, allowed: [String]) -> JSONValue? {
        guard case .object(let members) = value else {
            fail(path, "expected \(what) as an object, found \(value.kindName)")
            return nil
        }
        for member in members where !allowed.contains(member.key) {
            fail("\(path).\(member.key)", "unknown member '\(member.key)' in \(what); expected one of: \(allowed.joined(separator: ", "))")
        }
        return value
    }

    mutating func string(_ obj: JSONValue, _ key: String, _ path: String, required: Bool = false) -> String? {
        switch obj[key] {
        case nil, .null?:
            if required { fail(path, "missing required member '\(key)'") }
            return nil
        case .string(let s)?: return s
        case let other?:
            fail("\(path).\(key)", "'\(key)' must be a string, found \(other.kindName)")
            return nil
        }
    }

    mutating func bool(_ obj: JSONValue, _ key: String, _ path: String, default d: Bool) -> Bool {
        switch obj[key] {
        case nil, .null?: return d
        case .bool(let b)?: return b
        case let other?:
            fail("\(path).\(key)", "'\(key)' must be true or false, found \(other.kindName)")
            return d
        }
    }

    mutating func int(_ obj: JSONValue, _ key: String, _ path: String) -> Int? {
        switch obj[key] {
        case nil, .null?: return nil
        case .number(let n)? where Int(n) != nil: return Int(n)
        case let other?:
            fail("\(path).\(key)", "'\(key)' must be an integer, found \(other.kindName)")
            return nil
        }
    }

    mutating func array(_ obj: JSONValue, _ key: String, _ path: String) -> [JSONValue] {
        switch obj[key] {
        case nil, .null?: return []
        case .array(let items)?: return items
        case let other?:
            fail("\(path).\(key)", "'\(key)' must be an array, found \(other.kindName)")
            return []
        }
    }

    mutating func dictionary(_ obj: JSONValue, _ key: String, _ path: String) -> [String: String] {
        switch obj[key] {
        case nil, .null?: return [:]
        case .object(let members)?:
            var d: [String: String] = [:]
            for (k, v) in members {
                if case .string(let s) = v { d[k] = s } else { fail("\(path).\(key).\(k)", "'\(k)' must be a string, found \(v.kindName)") }
            }
            return d
        case let other?:
            fail("\(path).\(key)", "'\(key)' must be an object of strings, found \(other.kindName)")
            return [:]
        }
    }

    // MARK: - Document

    mutating func read(_ json: JSONValue) throws(ModelError) -> ManagedObjectModel {
        let top = ["formatVersion", "versionIdentifiers", "entities", "fetchRequestTemplates", "localizationDictionary"]
        guard case .object = json else {
            throw ModelError([.init(.malformedFile, entity: nil, property: nil, message: "a model file is a JSON object, found \(json.kindName)", location: "$")])
        }
        switch json["formatVersion"] {
        case .number(let n)?:
            guard let version = Int(n), version >= 1 else {
                throw ModelError([.init(.malformedFile, entity: nil, property: nil, message: "formatVersion \(n) is not a positive integer", location: "formatVersion")])
            }
            if version > ManagedObjectModel.currentFormatVersion {
                throw ModelError([
                    .init(
                        .unsupportedFormatVersion, entity: nil, property: nil,
                        message: "the model file has formatVersion \(version), newer than \(ManagedObjectModel.currentFormatVersion), the newest this version of Strata reads; upgrade Strata to open it",
                        location: "formatVersion")
                ])
            }
            formatVersion = version
        case nil:
            throw ModelError([.init(.malformedFile, entity: nil, property: nil, message: "missing required member 'formatVersion'", location: "$")])
        case let other?:
            throw ModelError([.init(.malformedFile, entity: nil, property: nil, message: "formatVersion must be an integer, found \(other.kindName)", location: "formatVersion")])
        }
        _ = object(json, "$", "the model", allowed: top)
        var model = ManagedObjectModel()
        var identifiers: Set<String> = []
        for (i, item) in array(json, "versionIdentifiers", "$").enumerated() {
            if case .string(let s) = item { identifiers.insert(s) } else { fail("versionIdentifiers[\(i)]", "version identifiers must be strings, found \(item.kindName)") }
        }
        model.versionIdentifiers = identifiers
        if json["entities"] == nil { fail("$", "missing required member 'entities'") }
        model.entities = array(json, "entities", "$").enumerated().map { entity($1, "entities[\($0)]") }
        model.fetchRequestTemplates = array(json, "fetchRequestTemplates", "$").enumerated().map {
            template($1, "fetchRequestTemplates[\($0)]")
        }
        model.localizationDictionary = dictionary(json, "localizationDictionary", "$")
        return model
    }

    mutating func entity(_ json: JSONValue, _ path: String) -> EntityDescription {
        let allowed = [
            "name", "className", "abstract", "superentity", "renamingIdentifier", "versionHashModifier", "userInfo",
            "attributes", "relationships", "fetchedProperties", "uniquenessConstraints", "indexes",
        ]
        guard let obj = object(json, path, "an entity", allowed: allowed) else { return EntityDescription(name: "") }
        let name = string(obj, "name", path, required: true) ?? ""
        var e = EntityDescription(
            name: name, managedObjectClassName: string(obj, "className", path), isAbstract: bool(obj, "abstract", path, default: false),
            superentityName: string(obj, "superentity", path))
        e.renamingIdentifier = string(obj, "renamingIdentifier", path)
        e.versionHashModifier = string(obj, "versionHashModifier", path)
        e.userInfo = dictionary(obj, "userInfo", path)
        e.attributes = array(obj, "attributes", path).enumerated().map { attribute($1, "\(path).attributes[\($0)]", entity: name) }
        e.relationships = array(obj, "relationships", path).enumerated().map { relationship($1, "\(path).relationships[\($0)]", entity: name) }
        e.fetchedProperties = array(obj, "fetchedProperties", path).enumerated().map { fetched($1, "\(path).fetchedProperties[\($0)]", entity: name) }
        for (ci, item) in array(obj, "uniquenessConstraints", path).enumerated() {
            let cpath = "\(path).uniquenessConstraints[\(ci)]"
            guard case .array(let names) = item else {
                fail(cpath, "a uniqueness constraint is an array of property names, found \(item.kindName)", entity: name)
                continue
            }
            var constraint: [String] = []
            for n in names {
                if case .string(let s) = n { constraint.append(s) } else { fail(cpath, "property names must be strings, found \(n.kindName)", entity: name) }
            }
            e.uniquenessConstraints.append(constraint)
        }
        e.indexes = array(obj, "indexes", path).enumerated().map { fetchIndex($1, "\(path).indexes[\($0)]", entity: name) }
        return e
    }

    /// An index; one that is not an object, and an element that is not an object or has no
    /// string `property`, is kept as a placeholder so later ones keep their locations.
    mutating func fetchIndex(_ json: JSONValue, _ path: String, entity: String) -> FetchIndexDescription {
        guard let obj = object(json, path, "an index", allowed: ["name", "elements"]) else {
            return FetchIndexDescription(name: "", elements: [])
        }
        let name = string(obj, "name", path, required: true) ?? ""
        if obj["elements"] == nil { fail(path, "missing required member 'elements'", entity: entity) }
        var elements: [FetchIndexElementDescription] = []
        for (ei, item) in array(obj, "elements", path).enumerated() {
            let epath = "\(path).elements[\(ei)]"
            guard let element = object(item, epath, "an index element", allowed: ["property", "collationType", "ascending"]),
                let property = string(element, "property", epath, required: true)
            else {
                // A mistyped `property` is reported at `….property`; the checker would
                // report the placeholder at the element.
                elements.append(FetchIndexElementDescription(propertyName: ""))
                placeholderLocations.append(epath)
                continue
            }
            var collation = FetchIndexElementDescription.CollationType.binary
            if let text = string(element, "collationType", epath) {
                if let known = FetchIndexElementDescription.CollationType(rawValue: text) {
                    collation = known
                } else {
                    let names = FetchIndexElementDescription.CollationType.allCases.map(\.rawValue).joined(separator: ", ")
                    fail(epath + ".collationType", "unknown collation type '\(text)'; expected one of: \(names)", entity: entity)
                }
            }
            elements.append(
                FetchIndexElementDescription(
                    propertyName: property, collationType: collation, isAscending: bool(element, "ascending", epath, default: true)))
        }
        return FetchIndexDescription(name: name, elements: elements)
    }

    mutating func value(_ obj: JSONValue, _ key: String, _ path: String, _ type: AttributeType?, entity: String, property: String) -> AttributeValue? {
        guard let json = obj[key], json != .null, let type else { return nil }
        do {
            return try AttributeValue(json: json, for: type)
        } catch {
            issues.append(
                .init(
                    .wrongValueType, entity: entity, property: property,
                    message: "\(key) \(json.serialized(pretty: false)) of attribute '\(property)' is not a \(type) value: \(error.reason)",
                    location: "\(path).\(key)"))
            return nil
        }
    }

    mutating func attribute(_ json: JSONValue, _ path: String, entity: String) -> AttributeDescription {
        let allowed = [
            "name", "type", "valueType", "derivation", "optional", "transient", "indexed", "providedAtInsert",
            "preservesValueInHistoryOnDeletion", "defaultValue",
            "minimumValue", "maximumValue", "minimumLength", "maximumLength", "regularExpression", "validationPredicates",
            "renamingIdentifier", "versionHashModifier", "userInfo",
        ]
        guard let obj = object(json, path, "an attribute", allowed: allowed) else { return AttributeDescription("", .string) }
        let name = string(obj, "name", path, required: true) ?? ""
        var type: AttributeType?
        if let typeName = string(obj, "type", path, required: true) {
            type = AttributeType(name: typeName, valueTypeName: string(obj, "valueType", path))
            if type == nil {
                issues.append(
                    .init(
                        .malformedFile, entity: entity, property: name,
                        message: "unknown attribute type '\(typeName)'; expected one of: \(AttributeType.allNames.joined(separator: ", "))",
                        location: path + ".type"))
            }
        }
        var a = AttributeDescription(name, type ?? .string)
        if let derivation = string(obj, "derivation", path) {
            if formatVersion < 2 {
                issues.append(
                    .init(
                        .malformedFile, entity: entity, property: name,
                        message: "'derivation' (a derived attribute) needs formatVersion 2; the file has formatVersion \(formatVersion)",
                        location: path + ".derivation"))
            }
            a.derivationExpression = ModelExpression(derivation)
        }
        a.isOptional = bool(obj, "optional", path, default: true)
        a.isTransient = bool(obj, "transient", path, default: false)
        a.isIndexed = bool(obj, "indexed", path, default: false)
        a.isProvidedAtInsert = bool(obj, "providedAtInsert", path, default: false)
        a.preservesValueInHistoryOnDeletion = bool(obj, "preservesValueInHistoryOnDeletion", path, default: false)
        a.defaultValue = value(obj, "defaultValue", path, type, entity: entity, property: name)
        if type == nil, obj["defaultValue"] != nil { a.isProvidedAtInsert = true }  // no second report for the unknown type
        a.minimumValue = value(obj, "minimumValue", path, type, entity: entity, property: name)
        a.maximumValue = value(obj, "maximumValue", path, type, entity: entity, property: name)
        a.minimumLength = int(obj, "minimumLength", path)
        a.maximumLength = int(obj, "maximumLength", path)
        a.regularExpression = string(obj, "regularExpression", path)
        for (pi, item) in array(obj, "validationPredicates", path).enumerated() {
            let ppath = "\(path).validationPredicates[\(pi)]"
            // One that can't be read is kept as a placeholder so the ones after it keep their locations.
            guard let rule = object(item, ppath, "a validation predicate", allowed: ["predicate", "warning"]),
                let predicate = string(rule, "predicate", ppath, required: true)
            else {
                a.validationPredicates.append(ValidationPredicate(ModelPredicate("TRUEPREDICATE"), warning: ""))
                continue
            }
            a.validationPredicates.append(ValidationPredicate(ModelPredicate(predicate), warning: string(rule, "warning", ppath, required: true) ?? ""))
        }
        a.renamingIdentifier = string(obj, "renamingIdentifier", path)
        a.versionHashModifier = string(obj, "versionHashModifier", path)
        a.userInfo = dictionary(obj, "userInfo", path)
        return a
    }

    mutating func relationship(_ json: JSONValue, _ path: String, entity: String) -> RelationshipDescription {
        let allowed = [
            "name", "destination", "inverse", "toMany", "ordered", "optional", "transient", "minCount", "maxCount", "deleteRule",
            "renamingIdentifier", "versionHashModifier", "userInfo",
        ]
        guard let obj = object(json, path, "a relationship", allowed: allowed) else { return RelationshipDescription("", to: "") }
        var r = RelationshipDescription(
            string(obj, "name", path, required: true) ?? "", to: string(obj, "destination", path, required: true) ?? "",
            inverse: string(obj, "inverse", path), toMany: bool(obj, "toMany", path, default: false),
            ordered: bool(obj, "ordered", path, default: false), optional: bool(obj, "optional", path, default: true))
        r.isTransient = bool(obj, "transient", path, default: false)
        r.minCount = int(obj, "minCount", path)
        r.maxCount = int(obj, "maxCount", path)
        if let rule = string(obj, "deleteRule", path) {
            if let parsed = DeleteRule(rawValue: rule) {
                r.deleteRule = parsed
            } else {
                fail(
                    path + ".deleteRule", "unknown delete rule '\(rule)'; expected one of: \(DeleteRule.allCases.map(\.rawValue).joined(separator: ", "))",
                    entity: entity, property: r.name)
            }
        }
        r.renamingIdentifier = string(obj, "renamingIdentifier", path)
        r.versionHashModifier = string(obj, "versionHashModifier", path)
        r.userInfo = dictionary(obj, "userInfo", path)
        return r
    }

    mutating func fetched(_ json: JSONValue, _ path: String, entity: String) -> FetchedPropertyDescription {
        let allowed = ["name", "entity", "predicate", "sortDescriptors", "renamingIdentifier", "userInfo"]
        guard let obj = object(json, path, "a fetched property", allowed: allowed) else {
            return FetchedPropertyDescription("", entity: "", predicate: "TRUEPREDICATE")
        }
        var f = FetchedPropertyDescription(
            string(obj, "name", path, required: true) ?? "", entity: string(obj, "entity", path, required: true) ?? "",
            predicate: ModelPredicate(string(obj, "predicate", path, required: true) ?? "TRUEPREDICATE"))
        let sorts = array(obj, "sortDescriptors", path)
        if !sorts.isEmpty, formatVersion < 3 {
            issues.append(
                .init(
                    .malformedFile, entity: entity, property: f.name,
                    message: "'sortDescriptors' (a fetched property's order) needs formatVersion 3; the file has formatVersion \(formatVersion)",
                    location: path + ".sortDescriptors"))
        }
        f.sortDescriptors = sorts.enumerated().compactMap { sortDescriptor($1, "\(path).sortDescriptors[\($0)]", entity: entity, property: f.name) }
        f.renamingIdentifier = string(obj, "renamingIdentifier", path)
        f.userInfo = dictionary(obj, "userInfo", path)
        return f
    }

    /// One sort descriptor of a fetched property; nil (with an issue) when it isn't an
    /// object with a `key`.
    mutating func sortDescriptor(_ json: JSONValue, _ path: String, entity: String, property: String) -> ModelSortDescriptor? {
        let allowed = ["key", "ascending", "caseInsensitive", "diacriticInsensitive", "numeric"]
        guard let obj = object(json, path, "a sort descriptor", allowed: allowed) else { return nil }
        guard let key = string(obj, "key", path, required: true) else { return nil }
        return ModelSortDescriptor(
            key, ascending: bool(obj, "ascending", path, default: true), caseInsensitive: bool(obj, "caseInsensitive", path, default: false),
            diacriticInsensitive: bool(obj, "diacriticInsensitive", path, default: false), numeric: bool(obj, "numeric", path, default: false))
    }

    /// A template; one that is not an object is kept as a placeholder so the ones after it
    /// keep their locations (the checker's issues about it are under its reported location).
    mutating func template(_ json: JSONValue, _ path: String) -> FetchRequestTemplate {
        guard let obj = object(json, path, "a fetch request template", allowed: ["name", "entity", "predicate"]) else {
            return FetchRequestTemplate("", entity: "")
        }
        return FetchRequestTemplate(
            string(obj, "name", path, required: true) ?? "", entity: string(obj, "entity", path, required: true) ?? "",
            predicate: string(obj, "predicate", path).map { ModelPredicate($0) })
    }
}
