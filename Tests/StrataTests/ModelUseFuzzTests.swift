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

    /// Each object's persisted state as one line: its URI, its attributes' values, its to-one
    /// destinations' URIs and its to-many destinations' URIs, sorted — by entity.
    private static func snapshot(_ context: isolated ManagedObjectContext, _ model: ManagedObjectModel) throws -> [String] {
        var lines: [String] = []
        for entity in model.entities {
            var request = FetchRequest(entityName: entity.name)
            request.includesSubentities = false
            for object in try context.fetch(request) {
                var fields = ["\(object.objectID.uriRepresentation())"]
                for property in entity.properties.sorted(by: { $0.name < $1.name }) {
                    if let attribute = entity.attributesByName[property.name] {
                        guard !attribute.isTransient else { continue }
                        fields.append("\(property.name)=\(object.value(forKey: property.name).map { "\($0)" } ?? "nil")")
                    } else if let relationship = entity.relationshipsByName[property.name] {
                        let value = object.value(forKey: property.name)
                        let targets: [ManagedObject]
                        if relationship.isToMany {
                            targets = (value as? Set<ManagedObject>).map(Array.init) ?? (value as? [ManagedObject]) ?? []
                        } else {
                            targets = (value as? ManagedObject).map { [$0] } ?? []
                        }
                        let uris = targets.map { "\($0.objectID.uriRepresentation())" }
                        fields.append("\(property.name)=\(relationship.isOrdered ? uris : uris.sorted())")
                    }
                }
                lines.append(fields.joined(separator: " "))
            }
        }
        return lines.sorted()
    }

    @Test("random inserts, updates, relationship changes, deletes, undo, redo, rollback, saves and restarts on mutated models: after every save a fresh context reads what the saving context holds")
    func randomWorkOnMutatedModels() async throws {
        let environment = ProcessInfo.processInfo.environment
        let size = environment["STRATA_MODEL_FUZZ_WORK_SIZE"].flatMap(Int.init) ?? 6
        var rng = SeededGenerator(seed: environment["STRATA_MODEL_FUZZ_SEED"].flatMap { UInt64($0) } ?? 0x30DE2)
        let files = ["kitchen-sink.json", "derived-attributes.json", "indexes.json", "employee-department.json", "league-manager.json", "student-class.json"]
        let roots = try files.map { ModelFileMutator.withoutValidationRules(try JSONSerialization.jsonObject(with: try SpecFiles.data("0002-model-file/\($0)"))) }
        var models = 0, attempts = 0, savesCompared = 0
        while models < size && attempts < size * 60 {
            attempts += 1
            var log: [String] = []
            var root = roots[attempts % roots.count]
            if rng.next() % 4 != 0 { root = ModelFileMutator.mutate(root, rng: &rng, log: &log) }
            root = ModelFileMutator.withoutValidationRules(root)
            guard let data = try? JSONSerialization.data(withJSONObject: root, options: [.sortedKeys]),
                let model = try? ManagedObjectModel(jsonData: data) else { continue }
            models += 1
            let what = "\(files[attempts % files.count]): \(log.joined(separator: "; "))"
            let directory = try TemporaryDirectory()
            let concrete = model.entities.filter { !$0.isAbstract }.map(\.name)
            guard !concrete.isEmpty else { continue }
            var coordinator = try openCoordinator(directory, model: model)
            var context = privateContext(coordinator)
            for step in 0..<40 {
                let choice = rng.next() % 100
                if choice >= 96 {
                    // A restart: a new coordinator and context.
                    coordinator = try openCoordinator(directory, model: model)
                    context = privateContext(coordinator)
                    continue
                }
                let seed = rng.next()
                let compared = try await context.perform { (context: isolated ManagedObjectContext) throws -> Bool in
                    var rng = SeededGenerator(seed: seed)
                    func pick<T>(_ items: [T]) -> T? { items.isEmpty ? nil : items[Int(rng.next() % UInt64(items.count))] }
                    var objects = try concrete.flatMap { try context.fetch(FetchRequest(entityName: $0)) }
                    objects = Array(Set(objects)).sorted { "\($0.objectID.uriRepresentation())" < "\($1.objectID.uriRepresentation())" }
                    switch choice {
                    case 0..<20:
                        guard let name = pick(concrete) else { return false }
                        let object = try context.insertNewObject(forEntityName: name)
                        for attribute in object.entity.attributesByName.values where !attribute.isDerived {
                            object.setValue(ModelFileMutator.sample(attribute.attributeType), forKey: attribute.name)
                        }
                    case 20..<40:
                        guard let object = pick(objects), let attribute = pick(Array(object.entity.attributesByName.values.filter { !$0.isDerived })) else { return false }
                        var value = ModelFileMutator.sample(attribute.attributeType)
                        if rng.next() % 3 == 0 { value = nil } else if attribute.attributeType == .string { value = "v\(step)" }
                        object.setValue(value, forKey: attribute.name)
                    case 40..<55:
                        guard let object = pick(objects), let relationship = pick(Array(object.entity.relationshipsByName.values)) else { return false }
                        let candidates = objects.filter { $0.entity.isKindOf(entityNamed: relationship.destinationEntityName) }
                        if relationship.isToMany {
                            let members = relationship.isOrdered ? object.mutableOrderedSetValue(forKey: relationship.name) : nil
                            let set = relationship.isOrdered ? nil : object.mutableSetValue(forKey: relationship.name)
                            if let target = pick(candidates) {
                                if rng.next() % 3 == 0 { members?.remove(target); set?.remove(target) } else { members?.add(target); set?.add(target) }
                            }
                        } else {
                            object.setValue(rng.next() % 4 == 0 ? nil : pick(candidates), forKey: relationship.name)
                        }
                    case 55..<63:
                        guard let object = pick(objects) else { return false }
                        context.delete(object)
                    case 63..<71:
                        if context.canUndo { try context.undo() }
                    case 71..<76:
                        if context.canRedo { try context.redo() }
                    case 76..<80:
                        context.rollback()
                    default:
                        do { try context.save() } catch is ContextError {
                            context.rollback()
                            return false
                        }
                        return true
                    }
                    return false
                }
                guard compared else { continue }
                savesCompared += 1
                let held = try await context.perform { (context: isolated ManagedObjectContext) throws in try Self.snapshot(context, model) }
                let fresh = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in try Self.snapshot(context, model) }
                if held != fresh {
                    let only = (Set(held).subtracting(fresh).sorted(), Set(fresh).subtracting(held).sorted())
                    Issue.record("step \(step): the saving context holds \(only.0), a fresh context reads \(only.1) — \(what)")
                    break
                }
            }
        }
        #expect(models == size && savesCompared > size, "\(models) models, \(savesCompared) saves compared in \(attempts) attempts")
    }
}
