import Foundation
import StrataTestSupport
import Testing

@testable import StrataModel

@Suite("Named indexes (FetchIndexDescription) in the model")
struct FetchIndexModelTests {
    // MARK: - Models

    /// The model of `Specs/0002-model-file/indexes.json`: compound, descending, inherited
    /// and to-one elements, and a sub-entity with indexes of its own.
    static var vectorModel: ManagedObjectModel {
        get throws {
            try ManagedObjectModel {
                Entity("Team") {
                    Attribute("name", .string)
                    Relationship("players", to: "Player", inverse: "team", toMany: true)
                    FetchIndex("byName", "name")
                }
                Entity("Player") {
                    Attribute("name", .string)
                    Attribute("score", .int32, default: 0)
                    Attribute("nickname", .string)
                    Relationship("team", to: "Team", inverse: "players")
                    FetchIndex("byTeamAndScore", elements: [.init(propertyName: "team"), .init(propertyName: "score", isAscending: false)])
                    FetchIndex("byName", "name", "nickname")
                }
                Entity("Captain", parent: "Player") {
                    Attribute("since", .date)
                    FetchIndex("bySince", "since")
                    FetchIndex("byTeamAndSince", "team", "since")
                }
            }
        }
    }

    /// A model assembled by hand (so the builder's check does not run) whose `Player`
    /// (`entities[2]`) declares `indexes` and whose superentity `Person` declares
    /// `parentIndexes`. `Player` has a persisted attribute `score`, an inherited `name`,
    /// a transient attribute `cache`, a to-one `team`, a transient to-one `lastOpponent`,
    /// a to-many `rivals` and a fetched property `teammates`.
    static func checked(_ indexes: [FetchIndexDescription], parentIndexes: [FetchIndexDescription] = []) -> ManagedObjectModel {
        var person = Entity("Person") { Attribute("name", .string) }
        person.indexes = parentIndexes
        var player = Entity("Player", parent: "Person") {
            Attribute("score", .int32, default: 0)
            Attribute("cache", .string).transient()
            Relationship("team", to: "Team", inverse: "players")
            Relationship("lastOpponent", to: "Player").transient()
            Relationship("rivals", to: "Player", toMany: true)
            FetchedProperty("teammates", entity: "Player", predicate: "team == $FETCH_SOURCE.team")
        }
        player.indexes = indexes
        var model = ManagedObjectModel()
        model.entities = [
            Entity("Team") { Relationship("players", to: "Player", inverse: "team", toMany: true) },
            person,
            player,
        ]
        return model
    }

    static func index(_ name: String, _ properties: String...) -> FetchIndexDescription {
        FetchIndexDescription(name: name, elements: properties.map { FetchIndexElementDescription(propertyName: $0) })
    }

    /// Reads a model file with one entity `E` (attributes `a` and `b`) whose `indexes`
    /// member is `indexes`, and returns the error it is refused with.
    func refusal(indexes: String) throws -> ModelError {
        let text = #"""
            {"formatVersion": 1, "entities": [{"name": "E", "attributes": [{"name": "a", "type": "string"}, {"name": "b", "type": "int32"}], "indexes": \#(indexes)}]}
            """#
        return try #require(throws: ModelError.self) { try ManagedObjectModel(jsonData: Data(text.utf8)) }
    }

    // MARK: - Builder

    @Test("FetchIndex items land in the entity's indexes, in order, binary and ascending by default")
    func builderIndexes() throws {
        let entity = Entity("Person") {
            Attribute("lastName", .string)
            FetchIndex("byName", "lastName", "firstName")
            Attribute("firstName", .string)
            Unique("lastName", "firstName")
            FetchIndex("byFirst", "firstName")
            FetchIndex("byAge", elements: [.init(propertyName: "age", isAscending: false), .init(propertyName: "lastName")])
            Attribute("age", .int16)
        }
        #expect(entity.indexes.map(\.name) == ["byName", "byFirst", "byAge"])
        #expect(entity.indexes[0].propertyNames == ["lastName", "firstName"])
        #expect(entity.indexes[0].elements.allSatisfy { $0.collationType == .binary && $0.isAscending })
        #expect(entity.indexes[1].elements == [FetchIndexElementDescription(propertyName: "firstName", collationType: .binary, isAscending: true)])
        #expect(entity.indexes[2].propertyNames == ["age", "lastName"])
        #expect(entity.indexes[2].elements.map(\.isAscending) == [false, true])
        #expect(entity.indexes[2].elements.map(\.collationType) == [.binary, .binary])
        // Indexes are neither properties nor uniqueness constraints.
        #expect(entity.attributes.map(\.name) == ["lastName", "firstName", "age"])
        #expect(entity.uniquenessConstraints == [["lastName", "firstName"]])
        #expect(entity.propertiesByName.count == 3)
    }

    @Test("FetchIndex spellings give the descriptions they document")
    func builderSpellings() {
        let element = FetchIndexElementDescription(propertyName: "score")
        #expect(element.collationType == .binary)
        #expect(element.isAscending)
        let byNames = FetchIndex("byTeamAndScore", "team", "score").description
        #expect(byNames == FetchIndexDescription(name: "byTeamAndScore", elements: [.init(propertyName: "team"), .init(propertyName: "score")]))
        #expect(byNames.propertyNames == ["team", "score"])
        let descending = FetchIndex("byScore", elements: [.init(propertyName: "score", isAscending: false)]).description
        #expect(descending.name == "byScore")
        #expect(descending.elements == [FetchIndexElementDescription(propertyName: "score", collationType: .binary, isAscending: false)])
        #expect(descending != FetchIndex("byScore", "score").description)
        let spatial = FetchIndex("where", elements: [.init(propertyName: "location", collationType: .rTree)]).description
        #expect(spatial.elements[0].collationType == .rTree)
        #expect(spatial.elements[0].isAscending)
        #expect(FetchIndex("none").description.elements.isEmpty)
        #expect(FetchIndexElementDescription.CollationType.allCases.map(\.rawValue) == ["binary", "rTree"])
    }

    @Test("FetchIndex works inside if, else and for in an entity block")
    func builderControlFlow() {
        let compound = true
        let entity = Entity("Sample") {
            for i in 1...2 {
                Attribute("value\(i)", .double)
                FetchIndex("byValue\(i)", "value\(i)")
            }
            if compound { FetchIndex("byBoth", "value1", "value2") } else { FetchIndex("never", "value1") }
            if !compound { FetchIndex("nor", "value2") }
        }
        #expect(entity.indexes.map(\.name) == ["byValue1", "byValue2", "byBoth"])
        #expect(entity.indexes.map(\.propertyNames) == [["value1"], ["value2"], ["value1", "value2"]])
    }

    @Test("The memberwise initializer keeps indexes; entities and models differing only in indexes are unequal")
    func initializerAndEquality() throws {
        let indexes = [Self.index("byName", "name")]
        let entity = EntityDescription(name: "E", attributes: [Attribute("name", .string)], indexes: indexes)
        #expect(entity.indexes == indexes)
        #expect(EntityDescription(name: "E", attributes: [Attribute("name", .string)]).indexes.isEmpty)
        var other = entity
        #expect(other == entity)
        other.indexes[0].elements[0].isAscending = false
        #expect(other != entity)
        other.indexes = []
        #expect(other != entity)
        other.indexes = indexes
        #expect(other == entity)
        #expect(Set([entity, other]).count == 1)
        let base = try Self.vectorModel
        var changed = base
        var entities = changed.entities
        entities[1].indexes.removeLast()
        changed.entities = entities
        #expect(changed != base)
        #expect(base.entity(named: "Player")?.indexes.map(\.name) == ["byTeamAndScore", "byName"])
        #expect(changed.entity(named: "Player")?.indexes.map(\.name) == ["byTeamAndScore"])
    }

    @Test("A sub-entity lists only the indexes it declares; its ancestors' stay with them")
    func indexesAreDeclaredOnly() throws {
        let model = try Self.vectorModel
        #expect(model.entity(named: "Captain")?.indexes.map(\.name) == ["bySince", "byTeamAndSince"])
        #expect(model.entity(named: "Player")?.indexes.map(\.name) == ["byTeamAndScore", "byName"])
        #expect(model.entity(named: "Team")?.indexes.map(\.name) == ["byName"])
    }

    // MARK: - Model file

    /// With `STRATA_REGENERATE_SPECS=1` the vector is rewritten from its builder first, as
    /// in ``ModelFileTests``.
    @Test("The indexes.json vector loads, equals its builder, and is what writing the builder gives")
    func vector() throws {
        let builder = try Self.vectorModel
        if ModelFileTests.regenerating { try builder.write(to: SpecFiles.url("0002-model-file/indexes.json")) }
        let loaded = try ManagedObjectModel(contentsOf: SpecFiles.url("0002-model-file/indexes.json"))
        #expect(loaded == builder)
        #expect(loaded.entity(named: "Player")?.indexes == builder.entity(named: "Player")?.indexes)
        #expect(loaded.entity(named: "Player")?.indexes[0].elements[1].isAscending == false)
        let onDisk = try SpecFiles.data("0002-model-file/indexes.json")
        #expect(String(decoding: builder.jsonData(), as: UTF8.self) == String(decoding: onDisk, as: UTF8.self))
    }

    @Test("write(to:) then init(contentsOf:) keeps every index exactly, pretty and compact")
    func fileRoundTrip() throws {
        let model = try Self.vectorModel
        let dir = try TemporaryDirectory("fetch-index-roundtrip")
        let url = dir.url.appendingPathComponent("model.json")
        try model.write(to: url)
        let reloaded = try ManagedObjectModel(contentsOf: url)
        #expect(reloaded == model)
        for entity in model.entities {
            #expect(reloaded.entity(named: entity.name)?.indexes == entity.indexes, "\(entity.name)")
        }
        #expect(reloaded.jsonData() == model.jsonData())
        let compact = try ManagedObjectModel(jsonData: model.jsonData(prettyPrinted: false))
        #expect(compact == model)
        #expect(compact.entity(named: "Player")?.indexes == model.entity(named: "Player")?.indexes)
    }

    @Test("The written indexes have the documented shape: defaults left out, ascending false written")
    func writtenShape() throws {
        let model = try ManagedObjectModel {
            Entity("Player") {
                Attribute("score", .int32, default: 0)
                Attribute("name", .string)
                FetchIndex("byScore", elements: [.init(propertyName: "score", isAscending: false), .init(propertyName: "name")])
            }
            Entity("Team") { Attribute("name", .string) }
        }
        let compact = String(decoding: model.jsonData(prettyPrinted: false), as: UTF8.self)
        #expect(compact.contains(#""indexes":[{"name":"byScore","elements":[{"property":"score","ascending":false},{"property":"name"}]}]"#), "\(compact)")
        #expect(!compact.contains("collationType"))
        #expect(!compact.contains(#""ascending":true"#))
        // Only the entity with indexes has the member, after its other members.
        #expect(compact.components(separatedBy: #""indexes""#).count == 2)
        #expect(compact.contains(#"{"name":"Team","attributes":[{"name":"name","type":"string"}]}"#), "\(compact)")
        #expect(compact.contains(#"{"name":"name","type":"string"}],"indexes":"#), "\(compact)")
        let pretty = String(decoding: model.jsonData(), as: UTF8.self)
        #expect(pretty.contains("\"indexes\": [\n        {\n          \"name\": \"byScore\",\n          \"elements\": [\n"), "\(pretty)")
        #expect(pretty.contains("\"property\": \"score\",\n              \"ascending\": false\n"), "\(pretty)")
        // The JSON parses back to exactly the documented members.
        let object = try #require(try JSONSerialization.jsonObject(with: model.jsonData()) as? [String: Any])
        let entities = try #require(object["entities"] as? [[String: Any]])
        let indexes = try #require(entities[0]["indexes"] as? [[String: Any]])
        #expect(indexes.count == 1)
        #expect(Set(indexes[0].keys) == ["name", "elements"])
        let elements = try #require(indexes[0]["elements"] as? [[String: Any]])
        #expect(elements.map { Set($0.keys) } == [["property", "ascending"], ["property"]])
        #expect(elements[0]["ascending"] as? Bool == false)
        #expect(entities[1]["indexes"] == nil)
    }

    @Test("A non-binary collation type is written by name, read back, and refused by the checker")
    func rTreeInFile() throws {
        var model = ManagedObjectModel()
        model.entities = [
            EntityDescription(
                name: "Place", attributes: [Attribute("location", .double)],
                indexes: [FetchIndexDescription(name: "where", elements: [.init(propertyName: "location", collationType: .rTree)])])
        ]
        let compact = String(decoding: model.jsonData(prettyPrinted: false), as: UTF8.self)
        #expect(compact.contains(#""elements":[{"property":"location","collationType":"rTree"}]"#), "\(compact)")
        let error = try #require(throws: ModelError.self) { try ManagedObjectModel(jsonData: model.jsonData()) }
        #expect(error.kinds == [.invalidFetchIndex])
        #expect(error.issues[0].location == "entities[0].indexes[0].elements[0].collationType")
        #expect((error.issues[0].entity, error.issues[0].property) == ("Place", "location"))
    }

    @Test("A model without indexes writes no indexes member")
    func noIndexesMember() throws {
        for (file, model) in try SeedModels.all + [("kitchen-sink.json", try KitchenSink.model)] {
            #expect(model.entities.allSatisfy { $0.indexes.isEmpty }, "\(file)")
            #expect(!String(decoding: model.jsonData(), as: UTF8.self).contains("\"indexes\""), "\(file)")
        }
        let text = #"{"formatVersion": 1, "entities": [{"name": "E", "attributes": [{"name": "a", "type": "string"}]}]}"#
        #expect(try ManagedObjectModel(jsonData: Data(text.utf8)).entity(named: "E")?.indexes == [])
    }

    @Test("An indexes member read from a file gives the described indexes, defaults filled in")
    func readIndexes() throws {
        let text = #"""
            {"formatVersion": 1, "entities": [{"name": "E", "attributes": [{"name": "a", "type": "string"}, {"name": "b", "type": "int32"}],
             "indexes": [{"name": "byA", "elements": [{"property": "a"}]},
                         {"name": "byBA", "elements": [{"property": "b", "ascending": false, "collationType": "binary"}, {"property": "a", "ascending": true}]}]}]}
            """#
        let entity = try #require(try ManagedObjectModel(jsonData: Data(text.utf8)).entity(named: "E"))
        #expect(entity.indexes == [
            FetchIndexDescription(name: "byA", elements: [.init(propertyName: "a")]),
            FetchIndexDescription(name: "byBA", elements: [.init(propertyName: "b", isAscending: false), .init(propertyName: "a")]),
        ])
    }

    @Test("Malformed indexes are refused as malformedFile at their JSON location", arguments: [
        (#"5"#, "entities[0].indexes", "'indexes' must be an array, found a number"),
        (#"[5]"#, "entities[0].indexes[0]", "expected an index as an object, found a number"),
        (#"[{"name": "i", "elements": [{"property": "a"}], "unique": true}]"#, "entities[0].indexes[0].unique",
         "unknown member 'unique' in an index; expected one of: name, elements"),
        (#"[{"name": "i", "elements": [{"property": "a", "order": "desc"}]}]"#, "entities[0].indexes[0].elements[0].order",
         "unknown member 'order' in an index element; expected one of: property, collationType, ascending"),
        (#"[{"name": "i"}]"#, "entities[0].indexes[0]", "missing required member 'elements'"),
        (#"[{"elements": [{"property": "a"}]}]"#, "entities[0].indexes[0]", "missing required member 'name'"),
        (#"[{"name": 7, "elements": [{"property": "a"}]}]"#, "entities[0].indexes[0].name", "'name' must be a string, found a number"),
        (#"[{"name": "i", "elements": {"property": "a"}}]"#, "entities[0].indexes[0].elements", "'elements' must be an array, found an object"),
        (#"[{"name": "i", "elements": ["a"]}]"#, "entities[0].indexes[0].elements[0]", "expected an index element as an object, found a string"),
        (#"[{"name": "i", "elements": [{"ascending": false}]}]"#, "entities[0].indexes[0].elements[0]", "missing required member 'property'"),
        (#"[{"name": "i", "elements": [{"property": 1}]}]"#, "entities[0].indexes[0].elements[0].property", "'property' must be a string, found a number"),
        (#"[{"name": "i", "elements": [{"property": "a", "collationType": "hash"}]}]"#, "entities[0].indexes[0].elements[0].collationType",
         "unknown collation type 'hash'; expected one of: binary, rTree"),
        (#"[{"name": "i", "elements": [{"property": "a", "collationType": 0}]}]"#, "entities[0].indexes[0].elements[0].collationType",
         "'collationType' must be a string, found a number"),
        (#"[{"name": "i", "elements": [{"property": "a", "ascending": "no"}]}]"#, "entities[0].indexes[0].elements[0].ascending",
         "'ascending' must be true or false, found a string"),
    ])
    func malformed(indexes: String, location: String, message: String) throws {
        let error = try refusal(indexes: indexes)
        // One problem, one issue: the checker does not report the same member again.
        #expect(error.issues.count == 1, "\(error)")
        let issue = try #require(error.issues.first { $0.location == location }, "\(error)")
        #expect(issue.kind == .malformedFile)
        #expect(issue.message.contains(message), "\(issue)")
    }

    @Test("The entity of an unknown collation type is named")
    func unknownCollationEntity() throws {
        let error = try refusal(indexes: #"[{"name": "i", "elements": [{"property": "a", "collationType": "RTREE"}]}]"#)
        #expect(error.issues.map(\.entity) == ["E"])
        #expect(error.description.contains("Entity 'E'"))
    }

    @Test("Well-formed but invalid indexes in a file are refused by the checker at their location")
    func invalidInFile() throws {
        let error = try refusal(indexes: #"""
            [{"name": "i", "elements": []}, {"name": "i", "elements": [{"property": "a"}, {"property": "c"}, {"property": "a"}]}]
            """#)
        let found = error.issues.map { "\($0.kind)|\($0.entity ?? "-")|\($0.property ?? "-")|\($0.location ?? "-")" }
        #expect(found == [
            "invalidFetchIndex|E|-|entities[0].indexes[0].elements",
            "invalidFetchIndex|E|-|entities[0].indexes[1].name",
            "invalidFetchIndex|E|c|entities[0].indexes[1].elements[1]",
            "invalidFetchIndex|E|a|entities[0].indexes[1].elements[2]",
        ])
    }

    @Test("A malformed index or element does not shift the locations of the ones after it")
    func malformedKeepsLaterLocations() throws {
        let indexError = try refusal(indexes: #"[5, {"name": "i", "elements": [{"property": "nope"}]}]"#)
        let found = indexError.issues.map { "\($0.kind)|\($0.property ?? "-")|\($0.location ?? "-")" }
        #expect(found == ["malformedFile|-|entities[0].indexes[0]", "invalidFetchIndex|nope|entities[0].indexes[1].elements[0]"])
        let elementError = try refusal(indexes: #"[{"name": "i", "elements": [{"ascending": true}, "b", {"property": "nope"}]}]"#)
        let elementIssues = elementError.issues.map { "\($0.kind)|\($0.property ?? "-")|\($0.location ?? "-")" }
        #expect(elementIssues == [
            "malformedFile|-|entities[0].indexes[0].elements[0]",
            "malformedFile|-|entities[0].indexes[0].elements[1]",
            "invalidFetchIndex|nope|entities[0].indexes[0].elements[2]",
        ])
    }

    // MARK: - Checking

    /// `invalidFetchIndex` cases on `Player` (`entities[2]`): its indexes, its superentity's,
    /// and the one issue expected — location, property, and a phrase of the message.
    static let invalidCases: [(indexes: [FetchIndexDescription], parent: [FetchIndexDescription], location: String, property: String?, phrase: String)] = [
        ([index("", "score")], [], "entities[2].indexes[0].name", nil, "index has no name"),
        ([index("byScore", "score"), index("byScore", "team")], [], "entities[2].indexes[1].name", nil,
         "another index of 'Player' is already named 'byScore'"),
        ([index("byName", "score")], [index("byName", "name")], "entities[2].indexes[0].name", nil,
         "index 'byName' is already declared by a superentity of 'Player'"),
        ([FetchIndexDescription(name: "empty", elements: [])], [], "entities[2].indexes[0].elements", nil, "index 'empty' has no elements"),
        ([index("twice", "score", "team", "score")], [], "entities[2].indexes[0].elements[2]", "score", "index 'twice' names 'score' twice"),
        ([index("byScore", "score"), index("unknown", "team", "rank")], [], "entities[2].indexes[1].elements[1]", "rank",
         "index 'unknown' names 'rank', which is not a property of 'Player'"),
        ([index("toMany", "rivals")], [], "entities[2].indexes[0].elements[0]", "rivals",
         "index 'toMany' names to-many relationship 'rivals'; only attributes and to-one relationships can be indexed"),
        ([index("fetched", "score", "teammates")], [], "entities[2].indexes[0].elements[1]", "teammates", "index 'fetched' names fetched property 'teammates'"),
        ([index("transient", "cache")], [], "entities[2].indexes[0].elements[0]", "cache",
         "index 'transient' names transient property 'cache', which is never stored"),
        ([index("transientToOne", "lastOpponent")], [], "entities[2].indexes[0].elements[0]", "lastOpponent",
         "names transient property 'lastOpponent'"),
        ([FetchIndexDescription(name: "spatial", elements: [.init(propertyName: "score", collationType: .rTree)])], [],
         "entities[2].indexes[0].elements[0].collationType", "score", "index 'spatial' asks for an R-tree on 'score'"),
    ]

    @Test("Each invalid index is one invalidFetchIndex issue with entity, property and location", arguments: invalidCases.indices)
    func invalid(index: Int) throws {
        let c = Self.invalidCases[index]
        let model = Self.checked(c.indexes, parentIndexes: c.parent)
        let issues = model.checkingIssues()
        try #require(issues.count == 1, "\(issues)")
        let issue = issues[0]
        #expect(issue.kind == .invalidFetchIndex)
        #expect(issue.entity == "Player")
        #expect(issue.property == c.property)
        #expect(issue.location == c.location)
        #expect(issue.message.contains(c.phrase), "\(issue.message)")
        #expect(throws: ModelError.self) { try model.validate() }
        // The same indexes without the fault are accepted (the fault is what is reported).
        #expect(Self.checked([Self.index("ok", "score")]).checkingIssues().isEmpty)
    }

    @Test("The builder refuses an invalid index like any other model problem")
    func builderRefusal() throws {
        let error = try #require(throws: ModelError.self) {
            try ManagedObjectModel {
                Entity("Team") {
                    Attribute("name", .string)
                    Relationship("players", to: "Team", toMany: true)
                    FetchIndex("byName", "name")
                    FetchIndex("byName", "name")
                    FetchIndex("byPlayers", "players")
                    FetchIndex("empty")
                }
            }
        }
        #expect(error.kinds == [.invalidFetchIndex, .invalidFetchIndex, .invalidFetchIndex])
        #expect(error.issues.map(\.location) == ["entities[0].indexes[1].name", "entities[0].indexes[2].elements[0]", "entities[0].indexes[3].elements"])
        #expect(error.issues.map(\.property) == [nil, "players", nil])
        #expect(error.issues[0].description.hasPrefix("Entity 'Team' (entities[0].indexes[1].name): "))
    }

    @Test("Several faults in one index are all reported, in element order")
    func severalFaults() {
        let faulty = FetchIndexDescription(
            name: "",
            elements: [.init(propertyName: "nope", collationType: .rTree), .init(propertyName: "score"), .init(propertyName: "score")])
        let issues = Self.checked([faulty]).checkingIssues()
        #expect(issues.map(\.kind) == Array(repeating: .invalidFetchIndex, count: 4))
        #expect(issues.map(\.location) == [
            "entities[2].indexes[0].name", "entities[2].indexes[0].elements[0].collationType",
            "entities[2].indexes[0].elements[0]", "entities[2].indexes[0].elements[2]",
        ])
        #expect(issues.map(\.property) == [nil, "nope", "nope", "score"])
    }

    @Test("A name declared by any ancestor, whichever comes first in the model, is refused")
    func grandparentName() throws {
        var root = Entity("Root") { Attribute("name", .string) }
        root.indexes = [Self.index("byName", "name")]
        var middle = Entity("Middle", parent: "Root") { Attribute("rank", .int16) }
        middle.indexes = [Self.index("byRank", "rank")]
        var leaf = Entity("Leaf", parent: "Middle") { Attribute("leafOnly", .string) }
        leaf.indexes = [Self.index("byLeaf", "leafOnly"), Self.index("byRank", "rank", "name"), Self.index("byName", "leafOnly")]
        var model = ManagedObjectModel()
        model.entities = [leaf, middle, root]
        let issues = model.checkingIssues()
        #expect(issues.map(\.kind) == [.invalidFetchIndex, .invalidFetchIndex])
        #expect(issues.map(\.entity) == ["Leaf", "Leaf"])
        #expect(issues.map(\.location) == ["entities[0].indexes[1].name", "entities[0].indexes[2].name"])
        #expect(issues[0].message.contains("index 'byRank' is already declared by a superentity of 'Leaf'"))
        #expect(issues[1].message.contains("index 'byName' is already declared by a superentity of 'Leaf'"))
    }

    @Test("Valid indexes: inherited attribute, to-one relationship, single element, sub-entity and sibling names, descending")
    func valid() throws {
        let model = try ManagedObjectModel {
            Entity("Team") {
                Attribute("name", .string)
                Relationship("players", to: "Player", inverse: "team", toMany: true)
                FetchIndex("byName", "name")
            }
            Entity("Person") {
                Attribute("name", .string)
                Attribute("born", .date)
                FetchIndex("byName", "name")
            }
            Entity("Player", parent: "Person") {
                Attribute("score", .int32, default: 0)
                Attribute("key", .string).derived(from: "lowercase(name)")
                Relationship("team", to: "Team", inverse: "players")
                FetchIndex("byInheritedName", "name")
                FetchIndex("byTeam", "team")
                FetchIndex("byTeamAndScore", elements: [.init(propertyName: "team"), .init(propertyName: "score", isAscending: false)])
                FetchIndex("byBornAndScore", "born", "score")
                FetchIndex("byKey", "key")
            }
            Entity("Coach", parent: "Person") {
                Attribute("since", .date)
                FetchIndex("byTeam", "since")
            }
        }
        #expect(model.checkingIssues().isEmpty)
        #expect(model.entity(named: "Player")?.indexes.count == 5)
        #expect(model.entity(named: "Coach")?.indexes.map(\.propertyNames) == [["since"]])
    }

    // MARK: - Version hash

    typealias Change = @Sendable (inout EntityDescription) -> Void

    /// Index changes on seed 000's `Employee`; none may change a hash.
    static let indexChanges: [(String, Change)] = [
        ("add an index", { $0.indexes.append(index("byName", "lastName", "firstName")) }),
        ("add an index over a to-one relationship", { $0.indexes.append(index("byDepartment", "department", "salary")) }),
        ("add two indexes", { $0.indexes = [index("a", "firstName"), index("b", "salary")] }),
        ("add a descending index", { $0.indexes = [FetchIndexDescription(name: "bySalary", elements: [.init(propertyName: "salary", isAscending: false)])] }),
    ]

    static func employee(_ model: ManagedObjectModel, _ change: Change) -> ManagedObjectModel {
        var changed = model
        var entities = changed.entities
        if let i = entities.firstIndex(where: { $0.name == "Employee" }) { change(&entities[i]) }
        changed.entities = entities
        return changed
    }

    @Test("Adding an index changes no entity or model version hash", arguments: indexChanges.indices)
    func hashIgnoresAddedIndex(index: Int) throws {
        let base = try SeedModels.employeeDepartment
        let changed = Self.employee(base, Self.indexChanges[index].1)
        #expect(changed != base, "\(Self.indexChanges[index].0)")
        #expect(changed.checkingIssues().isEmpty, "\(Self.indexChanges[index].0)")
        #expect(changed.entityVersionHashesByName == base.entityVersionHashesByName, "\(Self.indexChanges[index].0)")
        #expect(changed.entity(named: "Employee")?.versionHash == base.entity(named: "Employee")?.versionHash)
        #expect(changed.versionHash == base.versionHash)
        #expect(changed.isCompatible(withEntityVersionHashes: base.entityVersionHashesByName))
    }

    @Test("Removing, renaming, reordering or changing an index changes no version hash")
    func hashIgnoresChangedIndex() throws {
        let withIndexes = Self.employee(try SeedModels.employeeDepartment) {
            $0.indexes = [Self.index("byName", "lastName", "firstName"), Self.index("bySalary", "salary")]
        }
        try withIndexes.validate()
        let changes: [(String, Change)] = [
            ("remove one", { $0.indexes.removeLast() }),
            ("remove all", { $0.indexes = [] }),
            ("rename", { $0.indexes[0].name = "byFullName" }),
            ("reorder indexes", { $0.indexes.reverse() }),
            ("reorder elements", { $0.indexes[0].elements.reverse() }),
            ("descending", { $0.indexes[1].elements[0].isAscending = false }),
            ("other property", { $0.indexes[1].elements[0].propertyName = "department" }),
            ("extra element", { $0.indexes[1].elements.append(.init(propertyName: "manager")) }),
        ]
        for (what, change) in changes {
            let changed = Self.employee(withIndexes, change)
            #expect(changed != withIndexes, "\(what)")
            #expect(changed.checkingIssues().isEmpty, "\(what)")
            #expect(changed.entityVersionHashesByName == withIndexes.entityVersionHashesByName, "\(what)")
            #expect(changed.versionHash == withIndexes.versionHash, "\(what)")
        }
        // A persisted change next to an index still changes the hash.
        let persisted = Self.employee(withIndexes) { $0.attributes.append(Attribute("middleName", .string)) }
        #expect(persisted.entityVersionHashesByName["Employee"] != withIndexes.entityVersionHashesByName["Employee"])
    }

    @Test("A file model with indexes hashes like its builder and like the same model without indexes")
    func fileHashes() throws {
        let model = try Self.vectorModel
        let loaded = try ManagedObjectModel(contentsOf: SpecFiles.url("0002-model-file/indexes.json"))
        #expect(loaded.entityVersionHashesByName == model.entityVersionHashesByName)
        var bare = model
        bare.entities = model.entities.map { entity in
            var e = entity
            e.indexes = []
            return e
        }
        #expect(bare != model)
        #expect(bare.entityVersionHashesByName == model.entityVersionHashesByName)
        #expect(bare.versionHash == model.versionHash)
    }

    // MARK: - Codable

    @Test("EntityDescription Codable round-trips indexes exactly")
    func codableRoundTrip() throws {
        let model = try Self.vectorModel
        for entity in model.entities {
            let decoded = try JSONDecoder().decode(EntityDescription.self, from: JSONEncoder().encode(entity))
            #expect(decoded == entity, "\(entity.name)")
            #expect(decoded.indexes == entity.indexes, "\(entity.name)")
        }
        let player = try #require(model.entities.first { $0.name == "Player" })
        let decoded = try JSONDecoder().decode(EntityDescription.self, from: JSONEncoder().encode(player))
        #expect(decoded.indexes[0].elements.map(\.isAscending) == [true, false])
        var spatial = player
        spatial.indexes[1].elements[0].collationType = .rTree
        #expect(try JSONDecoder().decode(EntityDescription.self, from: JSONEncoder().encode(spatial)).indexes == spatial.indexes)
        let decodedModel = try JSONDecoder().decode(ManagedObjectModel.self, from: JSONEncoder().encode(model))
        #expect(decodedModel == model)
        #expect(decodedModel.entity(named: "Captain")?.indexes == model.entity(named: "Captain")?.indexes)
    }

    @Test("Codable: JSON from before indexes decodes with none; an entity without indexes encodes no key")
    func codableWithoutIndexes() throws {
        let old = #"""
            {"name": "E", "managedObjectClassName": "E", "isAbstract": false, "attributes": [], "relationships": [],
             "fetchedProperties": [], "uniquenessConstraints": [["a"]], "userInfo": {}}
            """#
        let decoded = try JSONDecoder().decode(EntityDescription.self, from: Data(old.utf8))
        #expect(decoded.indexes == [])
        #expect(decoded.uniquenessConstraints == [["a"]])
        let plain = EntityDescription(name: "E", attributes: [Attribute("a", .string)])
        let object = try #require(try JSONSerialization.jsonObject(with: JSONEncoder().encode(plain)) as? [String: Any])
        #expect(object["indexes"] == nil)
        #expect(object["uniquenessConstraints"] != nil)
        let indexed = EntityDescription(name: "E", attributes: [Attribute("a", .string)], indexes: [Self.index("byA", "a")])
        let indexedObject = try #require(try JSONSerialization.jsonObject(with: JSONEncoder().encode(indexed)) as? [String: Any])
        let indexes = try #require(indexedObject["indexes"] as? [[String: Any]])
        #expect(indexes.first?["name"] as? String == "byA")
    }
}
