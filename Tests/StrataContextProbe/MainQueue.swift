import Dispatch
import Foundation
import Strata
import StrataTestSupport

/// `StrataContextProbe mainqueue STORE`: a command-line program's main-queue context under
/// `dispatchMain()`, where the main queue's blocks may run on a thread other than the
/// process's first. Uses the view context of a container on STORE with the awaiting
/// `perform`, the non-async `perform`, and `performAndWait` from another thread and from
/// inside its own block, and first from the main thread itself before `dispatchMain()`;
/// prints "main thread N", "perform N", "scheduled on-queue", "waited N",
/// "nested N" and exits 0. A watchdog exits 1 after 20 s (a deadlock).
func runMainQueue(_ arguments: [String]) -> Never {
    guard arguments.count == 2 else { fail("usage: mainqueue STORE") }
    DispatchQueue.global().asyncAfter(deadline: .now() + 20) { fail("timed out: deadlock?") }
    let container: PersistentContainer
    do {
        container = PersistentContainer(
            name: "Probe", managedObjectModel: try SeedModels.leagueManager, storeURL: URL(fileURLWithPath: arguments[1]))
        try container.loadPersistentStores()
    } catch {
        fail("\(error)")
    }
    let view = container.viewContext
    // On the main thread, before the main queue runs (top-level code of a tool, as Core Data
    // allows: the main thread is the main queue's).
    do {
        let initial = try view.performAndWait { (context: isolated ManagedObjectContext) throws -> Int in
            try context.count(for: FetchRequest(entityName: "Team"))
        }
        say("main thread \(initial)")
    } catch {
        fail("performAndWait on the main thread: \(error)")
    }
    Task {
        do {
            let count = try await view.perform { (context: isolated ManagedObjectContext) throws -> Int in
                try context.insertNewObject(forEntityName: "Team").setValue("Main", forKey: "name")
                try context.save()
                return try context.count(for: FetchRequest(entityName: "Team"))
            }
            say("perform \(count)")
        } catch {
            fail("perform: \(error)")
        }
        scheduleChecks(view)
    }
    dispatchMain()
}

/// The non-async `perform` (chosen outside `async` code), then `performAndWait` from
/// another thread.
private func scheduleChecks(_ view: ManagedObjectContext) {
    view.perform { (context: isolated ManagedObjectContext) in
        say("scheduled \(context.isOnContextQueue ? "on-queue" : "off-queue")")
        DispatchQueue.global().async {
            do {
                let waited = try view.performAndWait { (context: isolated ManagedObjectContext) throws -> Int in
                    try context.count(for: FetchRequest(entityName: "Team"))
                }
                say("waited \(waited)")
                let nested = try view.performAndWait { (context: isolated ManagedObjectContext) throws -> Int in
                    try context.performAndWait { (context: isolated ManagedObjectContext) throws -> Int in
                        try context.count(for: FetchRequest(entityName: "Team"))
                    }
                }
                say("nested \(nested)")
                exit(0)
            } catch {
                fail("performAndWait: \(error)")
            }
        }
    }
}
