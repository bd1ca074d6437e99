import Foundation
import Strata
import StrataTestSupport
import Testing

/// `strata` on stores whose models are structurally mutated model files that load (see
/// `ModelFileMutator`): every read-only command either works or refuses with a message —
/// never a crash — and the SQL export loads in `sqlite3 -bail`.
/// `STRATA_MODEL_FUZZ_CLI_SIZE` stores (default 6), `STRATA_MODEL_FUZZ_SEED`.
@Suite("strata on stores with mutated models")
struct ModelFuzzCommandTests {
    /// A store with `model` filled by ``fillWithSamples(_:_:tag:)``, saved (or, when that fails validation, the store empty).
    private static func makeStore(_ model: ManagedObjectModel, in directory: TemporaryDirectory) async throws -> (path: String, saved: Bool) {
        let url = directory.url.appendingPathComponent("store")
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        try coordinator.addPersistentStore(type: .eventLog, at: url)
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        return try await context.perform { (context: isolated ManagedObjectContext) throws in
            try fillWithSamples(context, model, tag: 1)
            do {
                try context.save()
                return (url.path, true)
            } catch is ContextError {
                context.rollback()
                return (url.path, false)
            }
        }
    }

    /// A command's result: it worked, or it refused with a message (exit 1 or 64); a signal
    /// or a Swift runtime trap is a crash.
    private static func expectNoCrash(_ result: ProcessResult, _ what: String) {
        let crashed = result.status > 64 || result.standardError.contains("Fatal error") || result.standardError.contains("Stack dump")
        #expect(!crashed, "\(what) crashed (\(result.status)): \(result.standardError.prefix(2000))")
        if result.status != 0 {
            #expect(!result.standardError.isEmpty, "\(what) failed without saying why")
        }
    }

    @Test("info, verify, log, replay and every export format work on stores with mutated models; the SQL export loads in sqlite3")
    func commandsOnMutatedModels() async throws {
        let environment = ProcessInfo.processInfo.environment
        let size = environment["STRATA_MODEL_FUZZ_CLI_SIZE"].flatMap(Int.init) ?? 6
        var rng = SeededGenerator(seed: environment["STRATA_MODEL_FUZZ_SEED"].flatMap { UInt64($0) } ?? 0xC11F)
        let files = ["kitchen-sink.json", "derived-attributes.json", "indexes.json", "employee-department.json"]
        let roots = try files.map { try JSONSerialization.jsonObject(with: try SpecFiles.data("0002-model-file/\($0)")) }
        let sqlite = toolIsInstalled("sqlite3")
        var stores = 0
        var withData = 0
        var attempts = 0
        while stores < size && attempts < size * 50 {
            attempts += 1
            var log: [String] = []
            var root = roots[attempts % roots.count]
            for _ in 0..<Int(rng.next() % 2 + 1) { root = ModelFileMutator.mutate(root, rng: &rng, log: &log) }
            // Validation rules off, so the sample values save: the commands read data.
            root = ModelFileMutator.withoutValidationRules(root)
            guard let data = try? JSONSerialization.data(withJSONObject: root, options: [.sortedKeys]),
                let model = try? ManagedObjectModel(jsonData: data) else { continue }
            stores += 1
            let what = "\(files[attempts % files.count]) \(log.joined(separator: "; "))"
            let directory = try TemporaryDirectory()
            let (store, saved) = try await Self.makeStore(model, in: directory)
            if saved { withData += 1 }
            for arguments in [["info", store], ["verify", store], ["log", store], ["replay", store], ["export", store],
                              ["export", store, "--format", "ndjson"], ["export", store, "--format", "postgres"]] {
                Self.expectNoCrash(try await runProcessAsync(BuildProducts.executable("strata"), arguments), "strata \(arguments.joined(separator: " ")) — \(what)")
            }
            let verify = try await strataAsync("verify", store)
            #expect(verify.status == 0, "verify: \(verify.standardOutput) \(verify.standardError) — \(what)")
            let csv = try await strataAsync("export", store, "--format", "csv", "--output", directory.file("csv"))
            Self.expectNoCrash(csv, "export csv — \(what)")
            let script = directory.file("export.sql")
            let sql = try await strataAsync("export", store, "--format", "sql", "--output", script)
            Self.expectNoCrash(sql, "export sql — \(what)")
            if sqlite && sql.status == 0 {
                let load = try await runProcessAsync(URL(fileURLWithPath: "/usr/bin/env"), ["sqlite3", "-bail", directory.file("export.db"), ".read \(script)"])
                #expect(load.status == 0, "sqlite3 loads the export: \(load.standardError) — \(what)")
            }
        }
        #expect(stores == size, "\(stores) of \(size) mutated models loaded in \(attempts) attempts")
        #expect(withData * 2 >= stores, "\(withData) of \(stores) stores hold data")
    }
}

/// Two objects of every concrete entity of `model`, a value of its type in every attribute
/// (strings tagged with `tag` and the object's position), every relationship set.
func fillWithSamples(_ context: isolated ManagedObjectContext, _ model: ManagedObjectModel, tag: Int) throws {
    var objects: [ManagedObject] = []
    for entity in model.entities where !entity.isAbstract {
        for _ in 0..<2 { objects.append(try context.insertNewObject(forEntityName: entity.name)) }
    }
    for object in objects {
        for attribute in object.entity.attributesByName.values where !attribute.isDerived {
            var value = ModelFileMutator.sample(attribute.attributeType)
            if attribute.attributeType == .string { value = "S\(tag)-\(objects.firstIndex(of: object) ?? 0)" }
            object.setValue(value, forKey: attribute.name)
        }
        for relationship in object.entity.relationshipsByName.values {
            guard let target = objects.last(where: { $0.entity.isKindOf(entityNamed: relationship.destinationEntityName) }) else { continue }
            if relationship.isToMany {
                object.mutableSetValue(forKey: relationship.name).add(target)
            } else {
                object.setValue(target, forKey: relationship.name)
            }
        }
    }
}
