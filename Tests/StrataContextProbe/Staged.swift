import Foundation
import Strata
import StrataTestSupport

/// The staged migration of ``StagedPeopleModels`` from version 1 to 3, the same as
/// `StagedMigrationCrashTests`' (each target has its copy): the willMigrate handler trims
/// the names, the didMigrate handler splits them ten people a save. Both do no harm twice.
/// `report` hears "will", "batch N" after each save and "did".
func stagedPeopleManager(report: @escaping @Sendable (String) -> Void) throws -> StagedMigrationManager {
    let stage = CustomMigrationStage(migratingFrom: try StagedPeopleModels.version(1), to: try StagedPeopleModels.version(2), label: "split")
    stage.willMigrateHandler = { manager, _ in
        guard let container = manager.container else { return }
        try container.newBackgroundContext().performAndWait { context in
            for person in try context.fetch(FetchRequest(entityName: "Person")) {
                let name = person.value(forKey: "name") as? String ?? ""
                let trimmed = name.trimmingCharacters(in: .whitespaces)
                if trimmed != name { person.setValue(trimmed, forKey: "name") }
            }
            try context.save()
        }
        report("will")
    }
    stage.didMigrateHandler = { manager, _ in
        guard let container = manager.container else { return }
        var batch = 0
        while true {
            let done = try container.newBackgroundContext().performAndWait { context in
                var request = FetchRequest(entityName: "Person", predicate: try FormatPredicate(format: "firstName == nil"))
                request.fetchLimit = 10
                let people = try context.fetch(request)
                for person in people {
                    let (first, last) = StagedPeopleModels.split(person.value(forKey: "name") as? String ?? "")
                    person.setValue(first, forKey: "firstName")
                    person.setValue(last, forKey: "lastName")
                }
                try context.save()
                return people.isEmpty
            }
            if done { break }
            batch += 1
            report("batch \(batch)")
        }
        report("did")
    }
    return StagedMigrationManager([.custom(stage)])
}

/// `StrataContextProbe staged STORE`: adds the people store at STORE at version 3 with
/// ``stagedPeopleManager(report:)``, printing "start", the handlers' lines and "loaded".
func runStaged(_ arguments: [String]) -> Never {
    guard arguments.count == 2 else { fail("staged needs STORE") }
    do {
        let container = PersistentContainer(
            name: "People", managedObjectModel: try StagedPeopleModels.version(3), storeURL: URL(fileURLWithPath: arguments[1]))
        container.persistentStoreDescriptions.first?.stagedMigrationManager = try stagedPeopleManager(report: say)
        say("start")
        try container.loadPersistentStores()
        say("loaded")
        exit(0)
    } catch {
        fail("\(error)")
    }
}
