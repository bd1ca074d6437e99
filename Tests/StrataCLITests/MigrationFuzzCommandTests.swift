import Foundation
import Strata
import StrataTestSupport
import Testing

/// A store saved with a seed model, opened with a structurally mutated version of that model
/// (inferred migration, spec 0004 §4.3–4.6, spec 0006 §19): it migrates — and then every
/// object reads, fetches work, a save works, the save before the migration undoes (persisted
/// undo) or is refused with a context error, `strata verify` is clean, and the whole history
/// compacted, or replayed into a new store, gives the same state — or it is refused with
/// a `PersistentStoreError`, and the store still opens with its model holding every object.
/// Never a crash. `STRATA_MIGRATION_FUZZ_SIZE` pairs (default 8), `STRATA_MODEL_FUZZ_SEED`.
@Suite("Stores opened with mutated models (inferred migration)")
struct MigrationFuzzCommandTests {

    /// `strata info --format json`'s object.
    private static func info(_ store: String) throws -> [String: Any]? {
        let result = try strata("info", store, "--format", "json")
        return try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [String: Any]
    }

    /// The context whose save before the migration is undone after it (persisted undo).
    private static func editor(_ coordinator: PersistentStoreCoordinator) -> ManagedObjectContext {
        ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator, name: "editor", transactionAuthor: "fuzz", persistentUndo: true)
    }

    /// The number of objects of each entity (sub-entities counted in their own entity only).
    private static func counts(_ coordinator: PersistentStoreCoordinator) async throws -> [String: Int] {
        let model = coordinator.managedObjectModel
        return try await ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator).perform {
            (context: isolated ManagedObjectContext) throws in
            var counts: [String: Int] = [:]
            for entity in model.entities {
                var request = FetchRequest(entityName: entity.name)
                request.includesSubentities = false
                counts[entity.name] = try context.count(for: request)
            }
            return counts
        }
    }

    /// The attributes whose values a migration from `old` to `new` must keep as they are:
    /// by entity, those persisted and not derived in both models with the same type, in an
    /// entity of the same name in both, where no renaming identifier of `new` is involved.
    private static func keptAttributes(_ old: ManagedObjectModel, _ new: ManagedObjectModel) -> [String: [String]] {
        var kept: [String: [String]] = [:]
        for entity in new.entities {
            guard let before = old.entity(named: entity.name), entity.renamingIdentifier == nil,
                !new.entities.contains(where: { $0.renamingIdentifier == entity.name }) else { continue }
            let renamed = Set(entity.properties.compactMap(\.renamingIdentifier))
            kept[entity.name] = entity.attributesByName.values.filter { attribute in
                guard let was = before.attributesByName[attribute.name], !renamed.contains(attribute.name),
                    attribute.renamingIdentifier == nil else { return false }
                return was.attributeType == attribute.attributeType && !was.isTransient && !attribute.isTransient
                    && !was.isDerived && !attribute.isDerived
            }.map(\.name).sorted()
        }
        return kept
    }

    /// Each entity's objects' values of `attributes` (its own objects, not sub-entities'), as
    /// a sorted list of rows.
    private static func rows(_ coordinator: PersistentStoreCoordinator, _ attributes: [String: [String]]) async throws -> [String: [String]] {
        try await ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator).perform {
            (context: isolated ManagedObjectContext) throws in
            var rows: [String: [String]] = [:]
            for (entity, keys) in attributes {
                var request = FetchRequest(entityName: entity)
                request.includesSubentities = false
                rows[entity] = try context.fetch(request).map { object in
                    keys.map { "\($0)=\(object.value(forKey: $0).map { "\($0)" } ?? "nil")" }.joined(separator: " ")
                }.sorted()
            }
            return rows
        }
    }

    @Test("a store opened with a mutated model migrates and works, or is refused with its data intact")
    func mutatedModelMigrations() async throws {
        let environment = ProcessInfo.processInfo.environment
        let size = environment["STRATA_MIGRATION_FUZZ_SIZE"].flatMap(Int.init) ?? 8
        var rng = SeededGenerator(seed: environment["STRATA_MODEL_FUZZ_SEED"].flatMap { UInt64($0) } ?? 0x316)
        let files = ["kitchen-sink.json", "derived-attributes.json", "indexes.json", "employee-department.json", "league-manager.json"]
        let roots = try files.map { ModelFileMutator.withoutValidationRules(try JSONSerialization.jsonObject(with: try SpecFiles.data("0002-model-file/\($0)"))) }
        var pairs = 0, migrated = 0, refused = 0, attempts = 0, compared = 0
        while pairs < size && attempts < size * 60 {
            attempts += 1
            let index = attempts % roots.count
            let base = try ManagedObjectModel(jsonData: try JSONSerialization.data(withJSONObject: roots[index], options: [.sortedKeys]))
            var log: [String] = []
            var root = roots[index]
            for _ in 0..<Int(rng.next() % 2 + 1) { root = ModelFileMutator.mutate(root, rng: &rng, log: &log) }
            root = ModelFileMutator.withoutValidationRules(root)
            guard let data = try? JSONSerialization.data(withJSONObject: root, options: [.sortedKeys]),
                let mutated = try? ManagedObjectModel(jsonData: data), mutated != base else { continue }
            pairs += 1
            let what = "\(files[index]): \(log.joined(separator: "; "))"
            let directory = try TemporaryDirectory()
            let url = directory.url.appendingPathComponent("store")
            do {
                let coordinator = PersistentStoreCoordinator(managedObjectModel: base)
                try coordinator.addPersistentStore(type: PersistentStore.StoreType.eventLog, at: url)
                try await Self.editor(coordinator).perform {
                    (context: isolated ManagedObjectContext) throws in
                    try fillWithSamples(context, base, tag: 1)
                    try context.save()
                }
            }
            let before = try await Self.counts({
                let coordinator = PersistentStoreCoordinator(managedObjectModel: base)
                try coordinator.addPersistentStore(type: PersistentStore.StoreType.eventLog, at: url)
                return coordinator
            }())
            let kept = Self.keptAttributes(base, mutated)
            let keptBefore = try await Self.rows({
                let coordinator = PersistentStoreCoordinator(managedObjectModel: base)
                try coordinator.addPersistentStore(type: PersistentStore.StoreType.eventLog, at: url)
                return coordinator
            }(), kept)
            let infoBefore = try strata("info", url.path, "--format", "json")
            let coordinator = PersistentStoreCoordinator(managedObjectModel: mutated)
            do {
                try coordinator.addPersistentStore(type: PersistentStore.StoreType.eventLog, at: url)
            } catch let error as PersistentStoreError {
                refused += 1
                #expect(!"\(error)".isEmpty)
                // A refused migration writes nothing (spec 0004 §4.3): info reads the same.
                let infoAfter = try strata("info", url.path, "--format", "json")
                #expect(try withoutFileSizes(infoAfter.standardOutput) == withoutFileSizes(infoBefore.standardOutput), "a refused migration left the store's metadata as it was — \(what)")
                // Refused: nothing written; the store opens with its model, every object there.
                let again = PersistentStoreCoordinator(managedObjectModel: base)
                try again.addPersistentStore(type: PersistentStore.StoreType.eventLog, at: url)
                #expect(try await Self.counts(again) == before, "a refused migration keeps the data — \(what)")
                let verify = try await strataAsync("verify", url.path)
                #expect(verify.status == 0, "verify after a refused migration: \(verify.standardOutput) \(verify.standardError) — \(what)")
                continue
            } catch {
                Issue.record("opening with a mutated model threw \(error), not a refusal of the migration — \(what)")
                continue
            }
            migrated += 1
            // What the migration had no reason to touch is as it was.
            let keptAfter = try await Self.rows(coordinator, kept)
            compared += keptBefore.values.reduce(0) { $0 + $1.count }
            for (entity, rows) in keptBefore where keptAfter[entity] != rows {
                Issue.record("\(entity)'s values changed by the migration: \(rows) became \(keptAfter[entity] ?? []) — \(what)")
            }
            // Migrated: every object reads, fetches sort, a save works (or fails validation).
            do {
                try await ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator).perform {
                    (context: isolated ManagedObjectContext) throws in
                    for entity in mutated.entities {
                        var request = FetchRequest(entityName: entity.name)
                        for object in try context.fetch(request) {
                            for property in object.entity.properties { _ = object.value(forKey: property.name) }
                        }
                        for attribute in entity.attributesByName.keys.sorted() {
                            request.sortDescriptors = [FetchSortDescriptor(key: attribute)]
                            _ = try context.fetch(request)
                        }
                    }
                    try fillWithSamples(context, mutated, tag: 2)
                    do { try context.save() } catch is ContextError { context.rollback() }
                }
            } catch {
                Issue.record("using the migrated store failed: \(error) — \(what)")
            }
            // The persisted undo of the save before the migration: undone and saved, or
            // refused with a context error (a conflict, a validation failure).
            do {
                try await Self.editor(coordinator).perform { (context: isolated ManagedObjectContext) throws in
                    guard context.canUndo else { return }
                    do {
                        try context.undo()
                        try context.save()
                    } catch is ContextError {
                        context.rollback()
                    }
                }
            } catch {
                Issue.record("undoing across the migration failed: \(error) — \(what)")
            }
            let verify = try await strataAsync("verify", url.path)
            #expect(verify.status == 0, "verify after a migration: \(verify.standardOutput) \(verify.standardError) — \(what)")
            for arguments in [["info", url.path], ["log", url.path]] {
                let result = try await runProcessAsync(BuildProducts.executable("strata"), arguments)
                #expect(result.status == 0, "strata \(arguments[0]): \(result.standardError) — \(what)")
            }
            // The whole history, migration included, compacted into segments: the state reads
            // the same and verifies; replayed into a new store, it reads the same again.
            let exported = try await strataAsync("export", url.path)
            #expect(exported.status == 0, "export: \(exported.standardError) — \(what)")
            let head = try Self.info(url.path)?["head"] as? Int ?? 0
            let compact = try await strataAsync("compact", url.path, "--before", "\(head + 1)")
            #expect(compact.status == 0, "compact: \(compact.standardError) — \(what)")
            let compacted = try await strataAsync("verify", url.path)
            #expect(compacted.status == 0, "verify after compaction: \(compacted.standardOutput) \(compacted.standardError) — \(what)")
            #expect(try await strataAsync("export", url.path).standardOutput == exported.standardOutput, "compaction changed the state — \(what)")
            let copy = directory.file("replayed")
            let replay = try await strataAsync("replay", url.path, "--into", copy)
            #expect(replay.status == 0, "replay --into: \(replay.standardError) — \(what)")
            if replay.status == 0 {
                let verifyCopy = try await strataAsync("verify", copy)
                #expect(verifyCopy.status == 0, "verify of the replayed copy: \(verifyCopy.standardOutput) \(verifyCopy.standardError) — \(what)")
                let uuids = (try Self.info(url.path)?["storeUUID"] as? String ?? "", try Self.info(copy)?["storeUUID"] as? String ?? "")
                let copied = try await strataAsync("export", copy).standardOutput.replacingOccurrences(of: uuids.1, with: uuids.0)
                #expect(copied == exported.standardOutput, "the replayed copy's state differs — \(what)")
            }
        }
        #expect(pairs == size, "\(pairs) of \(size) pairs in \(attempts) attempts (\(migrated) migrated, \(refused) refused)")
        #expect(migrated > 0, "\(migrated) migrated, \(refused) refused")
        #expect(compared > 0, "rows compared across migrations: \(compared)")
    }
}
