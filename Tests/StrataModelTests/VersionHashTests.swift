import Foundation
import StrataTestSupport
import Testing

@testable import StrataModel

@Suite("Version hashes")
struct VersionHashTests {
    static func hex(_ data: Data) -> String { data.map { String(format: "%02x", $0) }.joined() }

    /// Golden values: the version hashes of seed 001's Run model. They must never change
    /// across processes, runs, platforms or refactorings — a store written today must be
    /// recognised by every later build. If this test fails, the hash encoding changed by
    /// accident (or, if on purpose, the spec's encoding version and every store need a
    /// migration story). Cross-checked with Python's hashlib over the byte encoding in
    /// Specs/0002-model-file.md, independently of this SHA-256 implementation.
    @Test func goldenRunHashes() throws {
        let model = try SeedModels.run
        #expect(Self.hex(try #require(model.entity(named: "Run")).versionHash) == Self.goldenRunEntity)
        #expect(model.versionHashString == Self.goldenRunModel)
    }

    static let goldenRunEntity = "682c6300f1dc9ac24e9ef3852b32539a1e2d12a12772cdf76607f7fa1efb6d9a"
    static let goldenRunModel = "897260bb05a19786d3806ceb4392bccd99a21f741ea9c6f79789a1754d36ebdf"

    @Test("The hash covers exactly the documented canonical bytes")
    func canonicalBytes() throws {
        let run = try #require(try SeedModels.run.entity(named: "Run"))
        var e = VersionHashEncoder()
        e.string("Strata.EntityVersionHash.1")
        e.string("Run")
        e.bool(false)
        e.optional(nil)
        e.optional(nil)
        e.count(2)
        for (name, type) in [("date", "date"), ("processID", "int32")] {
            e.string(name)
            e.string(type)
            e.bool(false)
            e.optional(nil)
        }
        e.count(0)
        #expect(run.versionHash == Data(SHA256.hash(e.bytes)))
        #expect(Array(e.bytes.prefix(8)) == [0, 0, 0, 26, 0x53, 0x74, 0x72, 0x61])
    }

    @Test("Builder and file models hash alike; every seed model's hashes are distinct per entity")
    func builderAndFileAgree() throws {
        for (file, model) in try SeedModels.all {
            let loaded = try ManagedObjectModel(contentsOf: SpecFiles.url("0002-model-file/\(file)"))
            #expect(loaded.entityVersionHashesByName == model.entityVersionHashesByName)
            #expect(Set(model.entityVersionHashesByName.values).count == model.entities.count)
        }
    }

    typealias Change = @Sendable (inout ManagedObjectModel) -> Void

    static func changing(_ change: @escaping @Sendable (inout EntityDescription) -> Void) -> Change {
        { model in
            var entities = model.entities
            if let i = entities.firstIndex(where: { $0.name == "Employee" }) { change(&entities[i]) }
            model.entities = entities
        }
    }

    /// Changes that alter the persisted shape: the Employee hash must change.
    static let sensitive: [(String, Change)] = [
        ("rename attribute", changing { $0.attributes[0].name = "givenName" }),
        ("attribute type", changing { $0.attributes[0].attributeType = .uuid }),
        ("optionality", changing { $0.attributes[0].isOptional.toggle() }),
        ("make transient", changing { $0.attributes[0].isTransient = true }),
        ("add attribute", changing { $0.attributes.append(Attribute("middleName", .string)) }),
        ("attribute hash modifier", changing { $0.attributes[0].versionHashModifier = "x" }),
        ("relationship destination", changing { $0.relationships[0].destinationEntityName = "Employee" }),
        ("to-many", changing { $0.relationships[1].isToMany = true }),
        ("ordered", changing { $0.relationships[2].isOrdered = true }),
        ("entity hash modifier", changing { $0.versionHashModifier = "2" }),
        ("abstract", changing { $0.isAbstract = true }),
        ("superentity", changing { $0.superentityName = "Department" }),
        ("rename entity", changing { $0.name = "Staff" }),
        ("make derived", changing { $0.attributes[0].derivationExpression = "lastName" }),
    ]

    /// Changes that leave the persisted shape alone: the hash must not change.
    static let insensitive: [(String, Change)] = [
        ("transient attribute type", changing { $0.attributes[3].attributeType = .int64 }),
        ("add transient", changing { $0.attributes.append(Attribute("cache", .string).transient()) }),
        ("user info", changing { $0.userInfo["doc"] = "x"; $0.attributes[0].userInfo["doc"] = "y" }),
        ("default value", changing { $0.attributes[2].defaultValue = .decimal(5) }),
        ("validation rules", changing {
            $0.attributes[0] = $0.attributes[0].length(min: 1, max: 9).matching("[A-Z].*").validated(by: "length > 0", warning: "w")
        }),
        ("indexed", changing { $0.attributes[0].isIndexed = true }),
        ("renaming identifier", changing { $0.attributes[0].renamingIdentifier = "first" }),
        ("delete rule", changing { $0.relationships[2].deleteRule = .cascade }),
        ("class name", changing { $0.managedObjectClassName = "EmployeeMO" }),
        ("property order", changing { $0.attributes.reverse() }),
        ("localization", { $0.localizationDictionary["Entity/Employee"] = "Staff" }),
        ("version identifiers", { $0.versionIdentifiers = ["3"] }),
        ("fetch template", { $0.fetchRequestTemplates.append(FetchRequestTemplate("all", entity: "Employee")) }),
    ]

    @Test("A persisted change changes the entity and model hash", arguments: sensitive.indices)
    func sensitivity(index: Int) throws {
        let base = try SeedModels.employeeDepartment
        var changed = base
        Self.sensitive[index].1(&changed)
        let name = Self.sensitive[index].0 == "rename entity" ? "Staff" : "Employee"
        #expect(changed.entityVersionHashesByName[name] != base.entityVersionHashesByName["Employee"], "\(Self.sensitive[index].0)")
        #expect(changed.versionHash != base.versionHash)
        #expect(!changed.isCompatible(withEntityVersionHashes: base.entityVersionHashesByName))
    }

    @Test("A non-persisted change leaves every hash alone", arguments: insensitive.indices)
    func insensitivity(index: Int) throws {
        let base = try SeedModels.employeeDepartment
        var changed = base
        Self.insensitive[index].1(&changed)
        #expect(changed.entityVersionHashesByName == base.entityVersionHashesByName, "\(Self.insensitive[index].0)")
        #expect(changed.versionHash == base.versionHash)
    }

    @Test("A sub-entity's hash covers inherited properties")
    func inheritedProperties() throws {
        let base = try KitchenSink.model
        var changed = base
        var entities = changed.entities
        entities[0].attributes.append(Attribute("title", .string))  // Person, the root
        changed.entities = entities
        #expect(changed.entityVersionHashesByName["Manager"] != base.entityVersionHashesByName["Manager"])
        #expect(changed.entityVersionHashesByName["Department"] == base.entityVersionHashesByName["Department"])
    }

    @Test("Store metadata comparison")
    func storeMetadata() throws {
        let model = try SeedModels.run
        let metadata: [String: Any] = [ManagedObjectModel.storeModelVersionHashesKey: model.entityVersionHashesByName]
        #expect(model.isConfiguration(compatibleWithStoreMetadata: metadata))
        #expect(!model.isConfiguration(withName: "Other", compatibleWithStoreMetadata: metadata))
        #expect(!(try SeedModels.person).isConfiguration(compatibleWithStoreMetadata: metadata))
        #expect(!model.isConfiguration(compatibleWithStoreMetadata: [:]))
    }
}
