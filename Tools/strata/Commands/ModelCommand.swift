import ArgumentParser
import Foundation
import Strata

/// `strata model`: a stored model version as text, JSON or a Graphviz diagram.
struct ModelCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "model",
        abstract: "Show a model version the store holds: as text, --json (the model file) or --dot (Graphviz).",
        discussion: """
            Every model version a store has seen is stored in it; --version picks one (default:
            the newest; `strata info` lists them). --dot draws entities with their attributes,
            inheritance as dashed arrows, and one arrow per relationship labelled with its name,
            cardinality and delete rule.

            Examples:
              strata model League.strata
              strata model League.strata --version 1 --json > v1.json
              strata model League.strata --dot | dot -Tsvg > model.svg
            """
    )

    @OptionGroup var options: StoreOptions

    @Flag(help: "Print the model file (JSON, spec 0002).")
    var json = false

    @Flag(help: "Print a Graphviz diagram.")
    var dot = false

    @Option(parsing: .unconditional, help: "The stored model version (default: the newest).")
    var version: Int?

    func validate() throws {
        if json && dot { throw ValidationError("--json and --dot can't be combined; pick one") }
        if let version, version < 1 { throw ValidationError("--version must be 1 or more, not \(version)") }
    }

    func run() throws {
        try runCommand {
            let log = try options.openReadOnly()
            let versions = log.storedModels().map(\.version)
            let chosen = version ?? versions.last ?? log.modelVersion
            guard versions.contains(chosen) else {
                throw CommandFailure("the store has no model version \(chosen) (versions: \(versions.map(String.init).joined(separator: ", ")))")
            }
            let model = try log.storedModel(version: chosen)
            let out = OutputSink()
            defer { out.close() }
            if json {
                out.write(String(decoding: model.jsonData(prettyPrinted: true), as: UTF8.self))
                out.line()
            } else if dot {
                out.write(Self.dot(model))
            } else {
                out.write(Self.text(model, version: chosen, of: versions))
            }
        }
    }

    static func entities(_ model: ManagedObjectModel) -> [EntityDescription] {
        model.entities.sorted { $0.name < $1.name }
    }

    /// `0..1`, `1`, `0..*`, `2..5`.
    static func cardinality(_ relationship: RelationshipDescription) -> String {
        if !relationship.isToMany { return relationship.isOptional ? "0..1" : "1" }
        let lower = relationship.minCount ?? (relationship.isOptional ? 0 : 1)
        let upper = relationship.maxCount.map(String.init) ?? "*"
        return "\(lower)..\(upper)"
    }

    static func text(_ model: ManagedObjectModel, version: Int, of versions: [Int]) -> String {
        var lines = ["model version \(version) (stored versions: \(versions.map(String.init).joined(separator: ", ")))"]
        for entity in entities(model) {
            lines.append("")
            var title = "entity \(entity.name)"
            if let parent = entity.superentityName { title += " : \(parent)" }
            if entity.isAbstract { title += " (abstract)" }
            lines.append(title)
            for attribute in entity.attributes.sorted(by: { $0.name < $1.name }) {
                var traits: [String] = [attribute.isOptional ? "optional" : "required"]
                if attribute.isIndexed { traits.append("indexed") }
                if attribute.isTransient { traits.append("transient") }
                if let value = attribute.defaultValue { traits.append("default \(ValueRendering.text(value))") }
                if let derivation = attribute.derivationExpression { traits.append("derived from \(derivation.format)") }
                lines.append("  attribute     \(attribute.name): \(attribute.attributeType.name)  (\(traits.joined(separator: ", ")))")
            }
            for relationship in entity.relationships.sorted(by: { $0.name < $1.name }) {
                var traits = [cardinality(relationship), relationship.isToMany ? (relationship.isOrdered ? "ordered to-many" : "to-many") : "to-one"]
                traits.append(relationship.inverseName.map { "inverse \($0)" } ?? "no inverse")
                traits.append("delete rule \(relationship.deleteRule.rawValue)")
                if relationship.isTransient { traits.append("transient") }
                lines.append("  relationship  \(relationship.name) → \(relationship.destinationEntityName)  (\(traits.joined(separator: ", ")))")
            }
            for constraint in entity.uniquenessConstraints {
                lines.append("  unique        (\(constraint.joined(separator: ", ")))")
            }
            for index in entity.indexes {
                let elements = index.elements.map { element in
                    element.propertyName + (element.isAscending ? "" : " descending") + (element.collationType == .binary ? "" : " (\(element.collationType.rawValue))")
                }
                lines.append("  index         \(index.name) (\(elements.joined(separator: ", ")))")
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    static func dot(_ model: ManagedObjectModel) -> String {
        func quoted(_ text: String) -> String {
            "\"" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
        }
        func recordText(_ text: String) -> String {
            var out = ""
            for character in text {
                if "{}|<>\"\\ ".contains(character) { out += "\\" }
                out.append(character)
            }
            return out
        }
        var lines = [
            "digraph model {",
            "  rankdir=LR;",
            "  node [shape=record, fontname=\"Helvetica\", fontsize=10];",
            "  edge [fontname=\"Helvetica\", fontsize=9];",
        ]
        for entity in entities(model) {
            let title = entity.isAbstract ? "\(recordText(entity.name))\\ (abstract)" : recordText(entity.name)
            let attributes = entity.attributes.sorted { $0.name < $1.name }
                .map { recordText("\($0.name): \($0.attributeType.name)\($0.isOptional ? "?" : "")") + "\\l" }
                .joined()
            lines.append("  \(quoted(entity.name)) [label=\"{\(title)|\(attributes)}\"];")
        }
        for entity in entities(model) {
            if let parent = entity.superentityName {
                lines.append("  \(quoted(entity.name)) -> \(quoted(parent)) [style=dashed, arrowhead=empty];")
            }
            for relationship in entity.relationships.sorted(by: { $0.name < $1.name }) {
                let label = "\(relationship.name) \(cardinality(relationship))\\n\(relationship.deleteRule.rawValue)"
                let head = relationship.isToMany ? "crow" : "normal"
                lines.append("  \(quoted(entity.name)) -> \(quoted(relationship.destinationEntityName)) [label=\(quoted(label).replacingOccurrences(of: "\\\\n", with: "\\n")), arrowhead=\(head)];")
            }
        }
        lines.append("}")
        return lines.joined(separator: "\n") + "\n"
    }
}
