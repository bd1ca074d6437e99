import Foundation
import Strata
import StrataTestSupport
import Testing

/// Structurally mutated model files (members removed, values swapped for other members'
/// values or odd scalars, array elements duplicated): each is refused with a `ModelError`, or
/// it loads, round-trips through its own file, and a store with it takes an insert of every
/// concrete entity, a save, fetches sorted by every attribute, and a reopen — never a crash.
/// `STRATA_MODEL_FUZZ_SIZE` mutated files (default 150), `STRATA_MODEL_FUZZ_SEED`.
@Suite("Mutated model files, loaded and used")
struct ModelUseFuzzTests {
    /// Inserts one object of every concrete entity, saves (a validation failure is fine),
    /// reads every property back, fetches sorted by every attribute, reopens.
    private static func use(_ model: ManagedObjectModel, in directory: TemporaryDirectory) async throws {
        let coordinator = try openCoordinator(directory, model: model)
        let entities = model.entities.filter { !$0.isAbstract }.map(\.name)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var objects: [ManagedObject] = []
            for name in entities { objects.append(try context.insertNewObject(forEntityName: name)) }
            // A value of its type in every writable attribute; every to-one set to an object
            // of its destination, every to-many given one.
            for object in objects {
                for attribute in object.entity.attributesByName.values where !attribute.isDerived {
                    object.setValue(ModelFileMutator.sample(attribute.attributeType), forKey: attribute.name)
                }
                for relationship in object.entity.relationshipsByName.values {
                    guard model.entity(named: relationship.destinationEntityName) != nil,
                        let target = objects.first(where: { $0.entity.isKindOf(entityNamed: relationship.destinationEntityName) }) else { continue }
                    if relationship.isToMany {
                        if relationship.isOrdered {
                            object.mutableOrderedSetValue(forKey: relationship.name).add(target)
                        } else {
                            object.mutableSetValue(forKey: relationship.name).add(target)
                        }
                    } else {
                        object.setValue(target, forKey: relationship.name)
                    }
                }
            }
            do { try context.save() } catch let error as ContextError {
                #expect(!"\(error)".isEmpty)
                context.rollback()
            }
            for object in objects {
                for property in object.entity.properties { _ = object.value(forKey: property.name) }
            }
            for entity in model.entities {
                var request = FetchRequest(entityName: entity.name)
                _ = try context.fetch(request)
                for attribute in entity.attributesByName.keys.sorted() {
                    request.sortDescriptors = [FetchSortDescriptor(key: attribute)]
                    _ = try context.fetch(request)
                }
            }
            // Every object deleted (delete rules run; deny may refuse the save), then undone.
            for object in objects where !object.isDeleted && object.managedObjectContext != nil { context.delete(object) }
            do { try context.save() } catch let error as ContextError {
                #expect(!"\(error)".isEmpty)
                context.rollback()
            }
            if context.canUndo { try context.undo() }
        }
        let again = try openCoordinator(directory, model: model)
        try await privateContext(again).perform { (context: isolated ManagedObjectContext) throws in
            for name in entities { _ = try context.count(for: FetchRequest(entityName: name)) }
        }
    }

    @Test("every mutated model file is refused with a ModelError, or loads, round-trips and works in a store")
    func mutatedModelsLoadAndWork() async throws {
        let environment = ProcessInfo.processInfo.environment
        let size = environment["STRATA_MODEL_FUZZ_SIZE"].flatMap(Int.init) ?? 150
        let seed = environment["STRATA_MODEL_FUZZ_SEED"].flatMap { UInt64($0) } ?? 0x30DE1
        var rng = SeededGenerator(seed: seed)
        let files = ["kitchen-sink.json", "derived-attributes.json", "indexes.json", "employee-department.json", "league-manager.json", "student-class.json", "run.json"]
        var roots: [(String, Any)] = []
        for file in files {
            roots.append((file, try JSONSerialization.jsonObject(with: try SpecFiles.data("0002-model-file/\(file)"))))
        }
        var (loaded, refused) = (0, 0)
        for iteration in 0..<size {
            let (file, base) = roots[iteration % roots.count]
            var log: [String] = []
            var root = base
            for _ in 0..<Int(rng.next() % 2 + 1) { root = ModelFileMutator.mutate(root, rng: &rng, log: &log) }
            guard let data = try? JSONSerialization.data(withJSONObject: root, options: [.sortedKeys]) else { continue }
            let context = "\(file), iteration \(iteration): \(log.joined(separator: "; "))"
            let model: ManagedObjectModel
            do {
                model = try ManagedObjectModel(jsonData: data)
            } catch {
                refused += 1
                #expect(!error.issues.isEmpty, "a refusal names its problems: \(context)")
                continue
            }
            loaded += 1
            let written = model.jsonData(prettyPrinted: false)
            let reread = try? ManagedObjectModel(jsonData: written)
            #expect(reread == model, "the loaded model round-trips through its own file: \(context)")
            let directory = try TemporaryDirectory()
            do {
                try await Self.use(model, in: directory)
            } catch {
                Issue.record("using a loaded model failed: \(error) — \(context)")
            }
        }
        #expect(loaded + refused >= size * 9 / 10)
        #expect(loaded > 0 && refused > 0, "\(loaded) loaded, \(refused) refused")
    }
}
