internal import Foundation

// MARK: - Model checking

extension ManagedObjectModel {
    /// Checks the model and throws one ``ModelError`` listing every problem.
    ///
    /// Building a model (with the builder or ``init(entities:fetchRequestTemplates:localizationDictionary:versionIdentifiers:)``)
    /// and loading one from a file call this; call it yourself after changing a model's
    /// parts. The rules, with the ``ModelError/Kind`` each reports:
    ///
    /// - names are non-empty identifiers (letters, digits, `_`; not starting with a digit) — `invalidName`
    /// - entity names are unique — `duplicateEntity`; property names are unique within an
    ///   entity, including inherited ones — `duplicateProperty`
    /// - superentities exist — `unknownSuperentity` — and form no cycle — `inheritanceCycle`
    /// - relationship destinations exist — `unknownDestination`; an inverse exists on the
    ///   destination — `inverseNotFound` — and names this relationship back, pointing at this
    ///   entity or a superentity of it — `inverseMismatch`
    /// - default values and minimum/maximum values match the attribute type — `wrongValueType`
    /// - a mandatory, persisted attribute without a default in a concrete entity is an error
    ///   unless marked ``AttributeDescription/isProvidedAtInsert`` — `missingDefaultValue`
    ///   (Core Data accepts such a model and fails every insert at save instead)
    /// - regular expressions compile — `invalidRegularExpression`; predicates parse — `invalidPredicate`
    /// - minimum ≤ maximum, counts and lengths ≥ 0, and value/length/pattern rules only on
    ///   types they apply to — `invalidRange`
    /// - uniqueness constraints name persisted attributes or to-one relationships — `invalidUniquenessConstraint`
    /// - indexes have a name unique along the inheritance chain and at least one element;
    ///   each element names a persisted attribute or to-one relationship once, in binary
    ///   collation — `invalidFetchIndex`
    /// - fetched properties name an existing entity, and their sort keys its key paths — `invalidFetchedProperty`
    /// - fetch request templates have unique names and an existing entity — `invalidFetchRequestTemplate`
    /// - derived attributes have a derivation Strata computes — a key path to an attribute
    ///   (through to-one relationships), a to-many aggregate, `now()`, `lowercase`,
    ///   `uppercase` or `canonical` of a key path — whose result fits the attribute's type,
    ///   read no derived attribute in a cycle, and are optional, persisted, without a default
    ///   or validation rules — `invalidDerivation`
    ///
    /// ```swift
    /// var model = ManagedObjectModel()
    /// model.entities = [Entity("Player") { Relationship("team", to: "Teem") }]
    /// try model.validate()  // throws: destination entity 'Teem' does not exist
    /// ```
    public func validate() throws(ModelError) {
        let issues = checkingIssues()
        if !issues.isEmpty { throw ModelError(issues) }
    }

    /// Every problem ``validate()`` would report, without throwing.
    ///
    /// ```swift
    /// model.checkingIssues().isEmpty
    /// ```
    public func checkingIssues() -> [ModelError.Issue] {
        var checker = ModelChecker(model: self)
        checker.run()
        return checker.issues
    }
}

// MARK: - ModelChecker

/// Collects model problems; one pass per concern, in model order.
extension ManagedObjectModel {
    /// Whether `name` is a name the model allows for an entity or property: a non-empty
    /// identifier of Unicode alphabetic characters, ASCII digits and `_`, not starting with a
    /// digit (spec 0002). Object URIs (spec 0005) accept exactly these entity names.
    package static func isValidName(_ name: String) -> Bool { ModelChecker.isIdentifier(name) }
}

struct ModelChecker {
    let model: ManagedObjectModel
    var issues: [ModelError.Issue] = []

    init(model: ManagedObjectModel) { self.model = model }

    mutating func report(
        _ kind: ModelError.Kind, _ entity: String?, _ property: String?, _ location: String, _ message: String
    ) {
        issues.append(ModelError.Issue(kind, entity: entity, property: property, message: message, location: location))
    }

    static func isIdentifier(_ name: String) -> Bool {
        guard let first = name.unicodeScalars.first, !("0"..."9").contains(first) else { return false }
        return name.unicodeScalars.allSatisfy { $0 == "_" || $0.properties.isAlphabetic || ("0"..."9").contains($0) }
    }

    mutating func run() {
        var seenEntities: Set<String> = []
        for (ei, entity) in model.entities.enumerated() {
            let path = "entities[\(ei)]"
            if !ModelChecker.isIdentifier(entity.name) {
                report(.invalidName, entity.name, nil, path + ".name", "entity name '\(entity.name)' is not an identifier")
            }
            if !seenEntities.insert(entity.name).inserted {
                report(.duplicateEntity, entity.name, nil, path + ".name", "another entity is already named '\(entity.name)'")
            }
            checkInheritance(entity, path)
            checkPropertyNames(entity, path)
            for (ai, attribute) in entity.attributes.enumerated() {
                checkAttribute(attribute, entity, "\(path).attributes[\(ai)]")
            }
            for (ri, relationship) in entity.relationships.enumerated() {
                checkRelationship(relationship, entity, "\(path).relationships[\(ri)]")
            }
            for (fi, fetched) in entity.fetchedProperties.enumerated() {
                checkFetchedProperty(fetched, entity, "\(path).fetchedProperties[\(fi)]")
            }
            checkInheritedDefaults(entity, path)
            for (ci, constraint) in entity.uniquenessConstraints.enumerated() {
                checkUniqueness(constraint, entity, "\(path).uniquenessConstraints[\(ci)]")
            }
            checkFetchIndexes(entity, path)
        }
        checkTemplates()
        checkDerivations()
    }

    // MARK: - Entities

    mutating func checkInheritance(_ entity: EntityDescription, _ path: String) {
        guard let parent = entity.superentityName else { return }
        guard model.entitiesByName[parent] != nil else {
            report(.unknownSuperentity, entity.name, nil, path + ".superentity", "superentity '\(parent)' does not exist")
            return
        }
        var chain = [entity.name]
        var next: String? = parent
        while let name = next, let current = model.entitiesByName[name] {
            if name == entity.name {
                report(
                    .inheritanceCycle, entity.name, nil, path + ".superentity",
                    "entity inherits from itself: \((chain + [name]).joined(separator: " → "))")
                return
            }
            if chain.contains(name) { return }  // a cycle further up, reported on its own entities
            chain.append(name)
            next = current.superentityName
        }
    }

    mutating func checkPropertyNames(_ entity: EntityDescription, _ path: String) {
        var inherited: [String: String] = [:]  // property → declaring entity
        for ancestor in entity.superentityNames.reversed() {
            guard let a = model.entitiesByName[ancestor] else { continue }
            for p in a.attributes.map(\.name) + a.relationships.map(\.name) + a.fetchedProperties.map(\.name) {
                inherited[p] = ancestor
            }
        }
        let declared: [(String, String)] =
            entity.attributes.enumerated().map { ($1.name, "\(path).attributes[\($0)]") }
            + entity.relationships.enumerated().map { ($1.name, "\(path).relationships[\($0)]") }
            + entity.fetchedProperties.enumerated().map { ($1.name, "\(path).fetchedProperties[\($0)]") }
        var seen: Set<String> = []
        for (name, location) in declared {
            if !ModelChecker.isIdentifier(name) {
                report(.invalidName, entity.name, name, location + ".name", "property name '\(name)' is not an identifier")
            }
            if !seen.insert(name).inserted {
                report(.duplicateProperty, entity.name, name, location + ".name", "another property of '\(entity.name)' is already named '\(name)'")
            } else if let owner = inherited[name] {
                report(
                    .duplicateProperty, entity.name, name, location + ".name",
                    "property '\(name)' clashes with the property of the same name inherited from '\(owner)'")
            }
        }
    }

    // MARK: - Attributes

    mutating func checkAttribute(_ a: AttributeDescription, _ entity: EntityDescription, _ path: String) {
        let subject = "attribute '\(a.name)'"
        if let value = a.defaultValue, !value.matches(a.attributeType) {
            report(
                .wrongValueType, entity.name, a.name, path + ".defaultValue",
                "default value \(value) of \(subject) does not match its type \(a.attributeType)\(ModelChecker.conversionHint(value, a.attributeType))")
        }
        if !a.isOptional, !a.isTransient, !a.isDerived, a.defaultValue == nil, !a.isProvidedAtInsert, !entity.isAbstract {
            report(
                .missingDefaultValue, entity.name, a.name, path,
                "\(subject) is mandatory but has no default value, so a new '\(entity.name)' object fails validation; give it a default, make it optional, or mark it provided at insert")
        }
        if case .transformable(let typeName) = a.attributeType, typeName.isEmpty {
            report(.invalidName, entity.name, a.name, path + ".valueType", "transformable \(subject) does not name its value type")
        }
        for (bound, key) in [(a.minimumValue, "minimumValue"), (a.maximumValue, "maximumValue")] {
            guard let bound else { continue }
            if !(a.attributeType.isNumeric || a.attributeType == .date) {
                report(.invalidRange, entity.name, a.name, "\(path).\(key)", "\(key) applies only to numeric and date attributes, not \(a.attributeType)")
            } else if !bound.matches(a.attributeType) {
                report(.wrongValueType, entity.name, a.name, "\(path).\(key)", "\(key) \(bound) of \(subject) does not match its type \(a.attributeType)")
            } else if ManagedObjectModel.isNaN(bound) {
                // Every comparison with NaN is false: such a bound would refuse every value.
                report(.invalidRange, entity.name, a.name, "\(path).\(key)", "\(key) of \(subject) is NaN, which no value can be compared with")
            }
        }
        if let lo = a.minimumValue, let hi = a.maximumValue, lo.matches(a.attributeType), hi.matches(a.attributeType),
            let order = AttributeValue.compare(lo, hi), order == .orderedDescending
        {
            report(.invalidRange, entity.name, a.name, path + ".minimumValue", "minimumValue \(lo.canonicalJSON) is greater than maximumValue \(hi.canonicalJSON)")
        }
        for (length, key) in [(a.minimumLength, "minimumLength"), (a.maximumLength, "maximumLength")] {
            guard let length else { continue }
            if !a.attributeType.hasLength {
                report(.invalidRange, entity.name, a.name, "\(path).\(key)", "\(key) applies only to string and binary data attributes, not \(a.attributeType)")
            } else if length < 0 {
                report(.invalidRange, entity.name, a.name, "\(path).\(key)", "\(key) \(length) is negative")
            }
        }
        if let lo = a.minimumLength, let hi = a.maximumLength, lo > hi {
            report(.invalidRange, entity.name, a.name, path + ".minimumLength", "minimumLength \(lo) is greater than maximumLength \(hi)")
        }
        if let pattern = a.regularExpression {
            if a.attributeType != .string {
                report(.invalidRange, entity.name, a.name, path + ".regularExpression", "a regular expression applies only to string attributes, not \(a.attributeType)")
            }
            do {
                _ = try NSRegularExpression(pattern: pattern)
            } catch {
                report(
                    .invalidRegularExpression, entity.name, a.name, path + ".regularExpression",
                    "regular expression \"\(pattern)\" of \(subject) does not compile: \(error.localizedDescription)")
            }
        }
        if a.isDerived { checkDerivedFlags(a, entity, path) }
        for (pi, rule) in a.validationPredicates.enumerated() {
            if let message = rule.predicate.syntaxError {
                report(
                    .invalidPredicate, entity.name, a.name, "\(path).validationPredicates[\(pi)].predicate",
                    "validation predicate \"\(rule.predicate.format)\" of \(subject) does not parse: \(message)")
            }
        }
    }

    static func conversionHint(_ value: AttributeValue, _ type: AttributeType) -> String {
        do {
            _ = try AttributeValue(any: value.anyValue, for: type)
            return ""
        } catch {
            return " (\(error.reason))"
        }
    }

    /// Mandatory attributes a concrete entity inherits from an abstract one are checked in
    /// the concrete entity, which is where inserts happen.
    mutating func checkInheritedDefaults(_ entity: EntityDescription, _ path: String) {
        guard !entity.isAbstract else { return }
        for ancestorName in entity.superentityNames {
            guard let ancestor = model.entitiesByName[ancestorName], ancestor.isAbstract else { continue }
            for a in ancestor.attributes
            where !a.isOptional && !a.isTransient && !a.isDerived && a.defaultValue == nil && !a.isProvidedAtInsert {
                report(
                    .missingDefaultValue, entity.name, a.name, path,
                    "attribute '\(a.name)', inherited from abstract '\(ancestorName)', is mandatory but has no default value, so a new '\(entity.name)' object fails validation")
            }
        }
    }

    // MARK: - Derived attributes

    /// What a derived attribute can't also be: the store computes its value at save, so it is
    /// stored, empty until then, and neither defaulted nor validated.
    mutating func checkDerivedFlags(_ a: AttributeDescription, _ entity: EntityDescription, _ path: String) {
        let subject = "derived attribute '\(a.name)'"
        if a.isTransient {
            report(.invalidDerivation, entity.name, a.name, path + ".transient", "\(subject) can't be transient: the store computes and keeps its value")
        }
        if !a.isOptional {
            report(
                .invalidDerivation, entity.name, a.name, path + ".optional",
                "\(subject) must be optional: it has no value until its object is first saved, and a key path through an empty relationship gives none")
        }
        if a.defaultValue != nil {
            report(.invalidDerivation, entity.name, a.name, path + ".defaultValue", "\(subject) can't have a default value: the store computes its value at save")
        }
        if a.isProvidedAtInsert {
            report(.invalidDerivation, entity.name, a.name, path + ".providedAtInsert", "\(subject) can't be provided at insert: apps never set it")
        }
        let rules: [(Bool, String)] = [
            (a.minimumValue != nil, "minimumValue"), (a.maximumValue != nil, "maximumValue"), (a.minimumLength != nil, "minimumLength"),
            (a.maximumLength != nil, "maximumLength"), (a.regularExpression != nil, "regularExpression"),
            (!a.validationPredicates.isEmpty, "validationPredicates"),
        ]
        for (present, key) in rules where present {
            report(
                .invalidDerivation, entity.name, a.name, "\(path).\(key)",
                "\(subject) can't have validation rules (\(key)): the store computes its value at save, after validation")
        }
    }

    /// Each derivation resolves against the model, and none reads derived attributes in a cycle.
    mutating func checkDerivations() {
        var plans: [DerivationPlan] = []
        var locations: [String: String] = [:]  // "Entity.attribute" → location
        for (ei, entity) in model.entities.enumerated() {
            for (ai, attribute) in entity.attributes.enumerated() where attribute.isDerived {
                let path = "entities[\(ei)].attributes[\(ai)].derivation"
                locations["\(entity.name).\(attribute.name)"] = path
                switch DerivationPlan.resolve(attribute, declaredBy: entity, in: model) {
                case .success(let plan):
                    plans.append(plan)
                case .failure(let problem) where !problem.isReportedElsewhere:
                    report(.invalidDerivation, entity.name, attribute.name, path, "derived attribute '\(attribute.name)': \(problem.message)")
                case .failure:
                    break
                }
            }
        }
        for (plan, message) in DerivationPlan.dependencyOrder(plans).cycles {
            report(.invalidDerivation, plan.entity, plan.attribute, locations[plan.qualifiedName] ?? "", "derived attribute '\(plan.attribute)': \(message)")
        }
    }

    // MARK: - Relationships

    mutating func checkRelationship(_ r: RelationshipDescription, _ entity: EntityDescription, _ path: String) {
        let subject = "relationship '\(r.name)'"
        if let lo = r.minCount, lo < 0 {
            report(.invalidRange, entity.name, r.name, path + ".minCount", "minCount \(lo) of \(subject) is negative")
        }
        if let hi = r.maxCount, hi < 0 {
            report(.invalidRange, entity.name, r.name, path + ".maxCount", "maxCount \(hi) of \(subject) is negative")
        }
        if let lo = r.minCount, let hi = r.maxCount, lo > hi {
            report(.invalidRange, entity.name, r.name, path + ".minCount", "minCount \(lo) of \(subject) is greater than maxCount \(hi)")
        }
        if !r.isToMany, let hi = r.maxCount, hi > 1 {
            report(.invalidRange, entity.name, r.name, path + ".maxCount", "to-one \(subject) cannot have maxCount \(hi)")
        }
        if r.isOrdered, !r.isToMany {
            report(.invalidRange, entity.name, r.name, path + ".ordered", "to-one \(subject) cannot be ordered")
        }
        guard let destination = model.entitiesByName[r.destinationEntityName] else {
            report(
                .unknownDestination, entity.name, r.name, path + ".destination",
                "destination entity '\(r.destinationEntityName)' of \(subject) does not exist")
            return
        }
        guard let inverseName = r.inverseName else { return }
        guard let inverse = destination.relationshipsByName[inverseName] else {
            report(
                .inverseNotFound, entity.name, r.name, path + ".inverse",
                "inverse '\(inverseName)' of \(subject) is not a relationship of '\(destination.name)'")
            return
        }
        if !entity.isKindOf(entityNamed: inverse.destinationEntityName) {
            report(
                .inverseMismatch, entity.name, r.name, path + ".inverse",
                "inverse '\(destination.name).\(inverseName)' of \(subject) points to '\(inverse.destinationEntityName)', not back to '\(entity.name)'")
        } else if inverse.inverseName != r.name {
            let actual = inverse.inverseName.map { "'\($0)'" } ?? "no inverse"
            report(
                .inverseMismatch, entity.name, r.name, path + ".inverse",
                "inverse '\(destination.name).\(inverseName)' of \(subject) does not point back: its inverse is \(actual), not '\(r.name)'")
        }
    }

    // MARK: - Fetched properties, uniqueness, templates

    mutating func checkFetchedProperty(_ f: FetchedPropertyDescription, _ entity: EntityDescription, _ path: String) {
        if model.entitiesByName[f.entityName] == nil {
            report(.invalidFetchedProperty, entity.name, f.name, path + ".entity", "fetched property '\(f.name)' fetches entity '\(f.entityName)', which does not exist")
        }
        if let message = f.predicate.syntaxError {
            report(.invalidPredicate, entity.name, f.name, path + ".predicate", "predicate \"\(f.predicate.format)\" of fetched property '\(f.name)' does not parse: \(message)")
        }
        guard let fetchedEntity = model.entitiesByName[f.entityName] else { return }
        for (si, sort) in f.sortDescriptors.enumerated() {
            if let problem = sortKeyProblem(sort.key, from: fetchedEntity) {
                report(.invalidFetchedProperty, entity.name, f.name, "\(path).sortDescriptors[\(si)].key", "sort key \"\(sort.key)\" of fetched property '\(f.name)': \(problem)")
            }
        }
    }

    /// Why `key` can't sort objects of `entity`, or nil: each component names a property of
    /// the entity reached so far, following relationships; after an attribute, a fetched
    /// property or a collection operator (`players.@count`) nothing more is checked, as a
    /// fetch's sort key is checked.
    func sortKeyProblem(_ key: String, from entity: EntityDescription) -> String? {
        guard !key.isEmpty else { return "the key is empty" }
        var current = entity
        for component in key.split(separator: ".", omittingEmptySubsequences: false).map(String.init) {
            if component.hasPrefix("@") { return nil }
            switch current.propertiesByName[component] {
            case nil:
                return "entity \(current.name) has no property \"\(component)\""
            case .relationship(let r)?:
                guard let destination = model.entitiesByName[r.destinationEntityName] else { return nil }
                current = destination
            default:
                return nil
            }
        }
        return nil
    }

    mutating func checkUniqueness(_ constraint: [String], _ entity: EntityDescription, _ path: String) {
        if constraint.isEmpty {
            report(.invalidUniquenessConstraint, entity.name, nil, path, "uniqueness constraint names no property")
        }
        for name in constraint {
            if let problem = Self.unstoredKey(name, entity, toManyNote: "only attributes and to-one relationships can be unique") {
                report(.invalidUniquenessConstraint, entity.name, name, path, "uniqueness constraint names \(problem)")
            }
        }
    }

    /// Why `name` can't be part of a stored key of `entity` (a uniqueness constraint, an
    /// index) — not a property, a to-many (`toManyNote` said after it), a fetched or a
    /// transient property — or nil when it is a persisted attribute or to-one relationship.
    static func unstoredKey(_ name: String, _ entity: EntityDescription, toManyNote: String) -> String? {
        switch entity.propertiesByName[name] {
        case nil: "'\(name)', which is not a property of '\(entity.name)'"
        case .relationship(let r) where r.isToMany: "to-many relationship '\(name)'; \(toManyNote)"
        case .fetchedProperty: "fetched property '\(name)'"
        case let property? where property.isTransient: "transient property '\(name)', which is never stored"
        default: nil
        }
    }

    mutating func checkFetchIndexes(_ entity: EntityDescription, _ path: String) {
        // Names are unique along the inheritance chain: a sub-entity's objects are in its
        // ancestors' indexes too.
        var inherited: Set<String> = []
        for ancestor in entity.superentityNames {
            for index in model.entitiesByName[ancestor]?.indexes ?? [] { inherited.insert(index.name) }
        }
        var seen: Set<String> = []
        for (ii, index) in entity.indexes.enumerated() {
            let ipath = "\(path).indexes[\(ii)]"
            if index.name.isEmpty {
                report(.invalidFetchIndex, entity.name, nil, ipath + ".name", "index has no name")
            } else if !seen.insert(index.name).inserted {
                report(.invalidFetchIndex, entity.name, nil, ipath + ".name", "another index of '\(entity.name)' is already named '\(index.name)'")
            } else if inherited.contains(index.name) {
                report(.invalidFetchIndex, entity.name, nil, ipath + ".name", "index '\(index.name)' is already declared by a superentity of '\(entity.name)'")
            }
            if index.elements.isEmpty {
                report(.invalidFetchIndex, entity.name, nil, ipath + ".elements", "index '\(index.name)' has no elements")
            }
            var properties: Set<String> = []
            for (ei, element) in index.elements.enumerated() {
                let epath = "\(ipath).elements[\(ei)]"
                let name = element.propertyName
                let what = "index '\(index.name)'"
                if element.collationType == .rTree {
                    report(.invalidFetchIndex, entity.name, name, epath + ".collationType", "\(what) asks for an R-tree on '\(name)'; Strata's store keeps binary indexes only")
                }
                if !properties.insert(name).inserted {
                    report(.invalidFetchIndex, entity.name, name, epath, "\(what) names '\(name)' twice")
                    continue
                }
                if let problem = Self.unstoredKey(name, entity, toManyNote: "only attributes and to-one relationships can be indexed") {
                    report(.invalidFetchIndex, entity.name, name, epath, "\(what) names \(problem)")
                }
            }
        }
    }

    mutating func checkTemplates() {
        var seen: Set<String> = []
        for (ti, t) in model.fetchRequestTemplates.enumerated() {
            let path = "fetchRequestTemplates[\(ti)]"
            if !seen.insert(t.name).inserted {
                report(.invalidFetchRequestTemplate, t.entityName, nil, path + ".name", "another fetch request template is already named '\(t.name)'")
            }
            if model.entitiesByName[t.entityName] == nil {
                report(.invalidFetchRequestTemplate, t.entityName, nil, path + ".entity", "fetch request template '\(t.name)' names entity '\(t.entityName)', which does not exist")
            }
            if let predicate = t.predicate, let message = predicate.syntaxError {
                report(.invalidPredicate, t.entityName, nil, path + ".predicate", "predicate \"\(predicate.format)\" of fetch request template '\(t.name)' does not parse: \(message)")
            }
        }
    }
}

extension ManagedObjectModel {
    /// Whether `value` is a NaN double, float or decimal.
    static func isNaN(_ value: AttributeValue) -> Bool {
        switch value {
        case .double(let v): v.isNaN
        case .float(let v): v.isNaN
        case .decimal(let v): v.isNaN
        default: false
        }
    }
}
