import Foundation
import StrataTestSupport
import Testing

@testable import StrataModel

@Suite("Model files")
struct ModelFileTests {
    /// With `STRATA_REGENERATE_SPECS=1`, the example files are rewritten from the builders
    /// before they are compared (after an intended format change; review the diff).
    static var regenerating: Bool { ProcessInfo.processInfo.environment["STRATA_REGENERATE_SPECS"] == "1" }

    static let seedFiles = [
        "run.json", "student-class.json", "league-manager.json", "employee-department.json", "person.json", "people.json",
        "derived-attributes.json",
    ]

    @Test("The model file equals the builder model", arguments: seedFiles)
    func fileEqualsBuilder(file: String) throws {
        let builder = try #require(try SeedModels.all.first { $0.file == file }?.model)
        let loaded = try ManagedObjectModel(contentsOf: SpecFiles.url("0002-model-file/\(file)"))
        #expect(loaded == builder)
        #expect(loaded.versionHash == builder.versionHash)
    }

    @Test("Writing a seed model reproduces its file byte for byte", arguments: seedFiles)
    func outputIsStable(file: String) throws {
        let builder = try #require(try SeedModels.all.first { $0.file == file }?.model)
        if Self.regenerating { try builder.write(to: SpecFiles.url("0002-model-file/\(file)")) }
        let onDisk = try SpecFiles.data("0002-model-file/\(file)")
        #expect(String(decoding: builder.jsonData(), as: UTF8.self) == String(decoding: onDisk, as: UTF8.self))
    }

    @Test("write(to:) then init(contentsOf:) gives an equal model, for every seed and a kitchen-sink model")
    func roundTrip() throws {
        let dir = try TemporaryDirectory("model-roundtrip")
        for model in try SeedModels.all.map(\.model) + [try KitchenSink.model] {
            let url = dir.url.appendingPathComponent("model.json")
            try model.write(to: url)
            let reloaded = try ManagedObjectModel(contentsOf: url)
            #expect(reloaded == model)
            #expect(reloaded.jsonData() == model.jsonData())
            let compact = try ManagedObjectModel(jsonData: model.jsonData(prettyPrinted: false))
            #expect(compact == model)
        }
    }

    @Test("The kitchen-sink example file loads and equals its builder")
    func kitchenSinkFile() throws {
        if Self.regenerating { try KitchenSink.model.write(to: SpecFiles.url("0002-model-file/kitchen-sink.json")) }
        let loaded = try ManagedObjectModel(contentsOf: SpecFiles.url("0002-model-file/kitchen-sink.json"))
        #expect(loaded == (try KitchenSink.model))
        let mgr = try #require(loaded.entity(named: "Manager"))
        #expect(mgr.attributesByName["tags"]?.defaultValue == (try AttributeValue.transformable(encoding: ["new"])))
    }

    @Test("Swift Codable round trip gives an equal model")
    func codableRoundTrip() throws {
        let model = try KitchenSink.model
        let data = try JSONEncoder().encode(model)
        #expect(try JSONDecoder().decode(ManagedObjectModel.self, from: data) == model)
    }

    @Test("A newer formatVersion is refused with a clear error")
    func newerFormatVersion() throws {
        let url = SpecFiles.url("0002-model-file/invalid/future-version.json")
        let error = try #require(throws: ModelError.self) { try ManagedObjectModel(contentsOf: url) }
        #expect(error.kinds == [.unsupportedFormatVersion])
        #expect(error.file == url.path)
        #expect(error.description.contains("formatVersion 4"))
        #expect(error.description.contains("future-version.json"))
    }

    @Test("A JSON syntax error names line and column")
    func syntaxError() throws {
        let text = "{\n  \"formatVersion\": 1,\n  \"entities\": [\n    {\"name\": \"Run\",}\n  ]\n}"
        let error = try #require(throws: ModelError.self) { try ManagedObjectModel(jsonData: Data(text.utf8)) }
        #expect(error.kinds == [.malformedFile])
        #expect(error.issues[0].message.contains("line 4, column 20"))
    }

    @Test("Malformed members are all reported with their JSON location", arguments: [
        (#"{"entities": []}"#, "missing required member 'formatVersion'"),
        (#"{"formatVersion": 0, "entities": []}"#, "formatVersion 0 is not a positive integer"),
        (#"[1]"#, "a model file is a JSON object"),
    ])
    func malformedTopLevel(text: String, message: String) throws {
        let error = try #require(throws: ModelError.self) { try ManagedObjectModel(jsonData: Data(text.utf8)) }
        #expect(error.issues.count == 1)
        #expect(error.issues[0].message.contains(message))
    }

    @Test("The broken example file reports every problem with entity, property and location")
    func brokenFile() throws {
        let url = SpecFiles.url("0002-model-file/invalid/broken.json")
        let error = try #require(throws: ModelError.self) { try ManagedObjectModel(contentsOf: url) }
        let found = Set(error.issues.map { "\($0.kind)|\($0.entity ?? "-")|\($0.property ?? "-")|\($0.location ?? "-")" })
        let expected: Set<String> = [
            "malformedFile|-|-|entities[0].optinal",
            "malformedFile|Player|age|entities[0].attributes[1].type",
            "wrongValueType|Player|rating|entities[0].attributes[2].defaultValue",
            "malformedFile|Player|team|entities[0].relationships[0].deleteRule",
            "unknownDestination|Player|coach|entities[0].relationships[1].destination",
            "inverseMismatch|Player|team|entities[0].relationships[0].inverse",
            "invalidRegularExpression|Player|email|entities[0].attributes[0].regularExpression",
            "invalidPredicate|Player|rating|entities[0].attributes[2].validationPredicates[0].predicate",
            "duplicateEntity|Team|-|entities[2].name",
        ]
        #expect(found.isSuperset(of: expected.filter { !$0.hasPrefix("invalidPredicate") || predicateParserIsReal }))
        #expect(error.file == url.path)
        #expect(error.description.contains("broken.json"))
        #expect(error.description.contains("Entity 'Player', property 'coach' (entities[0].relationships[1].destination): destination entity 'Coach' of relationship 'coach' does not exist"))
    }

    /// True once the predicate module rejects bad syntax (its placeholder accepted anything).
    var predicateParserIsReal: Bool { ModelPredicate("SELF >").syntaxError != nil }

    @Test("Pretty output lists members in a fixed order, name first, defaults omitted")
    func outputShape() throws {
        let text = String(decoding: try SeedModels.run.jsonData(), as: UTF8.self)
        #expect(text.hasPrefix("{\n  \"formatVersion\": 1,\n  \"entities\": [\n    {\n      \"name\": \"Run\","))
        #expect(!text.contains("\"transient\""))
        #expect(text.contains("\"defaultValue\": -1"))
        #expect(text.hasSuffix("}\n"))
    }

    @Test("A missing file is a ModelError naming the file")
    func missingFile() throws {
        let dir = try TemporaryDirectory("model-missing")
        let url = dir.url.appendingPathComponent("absent.json")
        let error = try #require(throws: ModelError.self) { try ManagedObjectModel(contentsOf: url) }
        #expect(error.kinds == [.malformedFile])
        #expect(error.file == url.path)
    }

    @Test("Mistyped members are reported, not ignored or crashed on", arguments: [
        (#"{"name": "E", "abstract": "yes"}"#, "entities[0].abstract", "'abstract' must be true or false, found a string"),
        (#"{"name": "E", "attributes": [{"name": "a", "type": "int32", "minimumLength": "3"}]}"#,
         "entities[0].attributes[0].minimumLength", "'minimumLength' must be an integer"),
        (#"{"name": "E", "attributes": [{"name": "a"}]}"#, "entities[0].attributes[0]", "missing required member 'type'"),
        (#"{"name": "E", "attributes": [{"name": "a", "type": "int"}]}"#, "entities[0].attributes[0].type", "unknown attribute type 'int'"),
        (#"{"name": "E", "relationships": [{"name": "r"}]}"#, "entities[0].relationships[0]", "missing required member 'destination'"),
        (#"{"name": "E", "uniquenessConstraints": ["a"]}"#, "entities[0].uniquenessConstraints[0]", "array of property names"),
        (#"{"name": "E", "userInfo": {"k": 1}}"#, "entities[0].userInfo.k", "'k' must be a string"),
        (#""E""#, "entities[0]", "expected an entity as an object, found a string"),
    ])
    func mistypedMembers(entity: String, location: String, message: String) throws {
        let text = #"{"formatVersion": 1, "entities": ["# + entity + "]}"
        let error = try #require(throws: ModelError.self) { try ManagedObjectModel(jsonData: Data(text.utf8)) }
        let issue = try #require(error.issues.first { $0.location == location }, "\(error)")
        #expect(issue.message.contains(message), "\(issue)")
    }

    @Test("An unreadable template or validation predicate does not shift the locations of the ones after it", arguments: [
        (#"{"formatVersion": 1, "entities": [{"name": "E"}], "fetchRequestTemplates": [5, {"name": "x", "entity": "Nope"}]}"#,
         ["malformedFile|fetchRequestTemplates[0]", "invalidFetchRequestTemplate|fetchRequestTemplates[1].entity"]),
        (#"{"formatVersion": 1, "entities": [{"name": "E", "attributes": [{"name": "a", "type": "int32", "validationPredicates": [5, {"warning": "w"}, {"predicate": "SELF >", "warning": "w"}]}]}]}"#,
         [
            "malformedFile|entities[0].attributes[0].validationPredicates[0]",
            "malformedFile|entities[0].attributes[0].validationPredicates[1]",
            "invalidPredicate|entities[0].attributes[0].validationPredicates[2].predicate",
         ]),
    ])
    func unreadableItemsKeepLaterLocations(text: String, expected: [String]) throws {
        let error = try #require(throws: ModelError.self) { try ManagedObjectModel(jsonData: Data(text.utf8)) }
        #expect(error.issues.map { "\($0.kind)|\($0.location ?? "-")" } == expected)
    }

    @Test("Thousands of mutated model files never crash the reader")
    func fuzz() throws {
        let base = Array(try SpecFiles.data("0002-model-file/kitchen-sink.json"))
        var rng = SeededGenerator(seed: 0x5EED)
        let alphabet = Array(#"{}[]":,0123456789-.eE+truefalsnul \"#.utf8)
        var loaded = 0
        for _ in 0..<3000 {
            var bytes = base
            for _ in 0..<Int(rng.next() % 4 + 1) {
                let i = Int(rng.next() % UInt64(bytes.count))
                switch rng.next() % 3 {
                case 0: bytes[i] = alphabet[Int(rng.next() % UInt64(alphabet.count))]
                case 1: bytes.remove(at: i)
                default: bytes.insert(alphabet[Int(rng.next() % UInt64(alphabet.count))], at: i)
                }
            }
            if (try? ManagedObjectModel(jsonData: Data(bytes))) != nil { loaded += 1 }
        }
        #expect(loaded < 3000)
    }
}


