import Foundation
import Strata
import StrataTestSupport
import Testing

/// A coordinator with an event-log store in `directory` (a new one each call: a "restart").
func openCoordinator(_ directory: TemporaryDirectory, model: ManagedObjectModel, classes: [(ManagedObject.Type, String)] = [])
    throws -> PersistentStoreCoordinator
{
    let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
    for (type, entity) in classes { coordinator.register(type, forEntityName: entity) }
    try coordinator.addPersistentStore(type: .eventLog, at: directory.url.appendingPathComponent("store"))
    return coordinator
}

func privateContext(_ coordinator: PersistentStoreCoordinator, name: String? = nil, author: String? = nil, persistentUndo: Bool = false)
    -> ManagedObjectContext
{
    ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator, name: name, transactionAuthor: author, persistentUndo: persistentUndo)
}

/// A context with persisted undo, named "editor", author "alice": the same context after a
/// restart (a new coordinator) reads its undo stack back.
func editor(_ coordinator: PersistentStoreCoordinator) -> ManagedObjectContext {
    privateContext(coordinator, name: "editor", author: "alice", persistentUndo: true)
}

/// Seed 001's `Run`: `date` set in `awakeFromInsert`, `processID` set to 0 when nil.
final class Run: ManagedObject {
    var processID: Int32 {
        get { self.get("processID") ?? 0 }
        set { setValue(newValue, forKey: "processID") }
    }
    var date: Date? { self.get("date") }

    override func awakeFromInsert() {
        super.awakeFromInsert()
        setPrimitiveValue(Date(), forKey: "date")
    }

    override func setNilValueForKey(_ key: String) {
        if key == "processID" { setValue(Int32(0), forKey: key) } else { super.setNilValueForKey(key) }
    }
}

/// Seed 001's `ClassEntity`: removing a student who is the monitor clears the monitor.
final class SchoolClass: ManagedObject {
    func removeStudentsObject(_ student: ManagedObject) {
        if let monitor = value(forKey: "monitor") as? ManagedObject, monitor == student { setValue(nil, forKey: "monitor") }
        mutableSetValue(forKey: "students").remove(student)
    }
}

/// Seed 000's `Employee`: the transient `fullName` is computed in `awakeFromFetch`.
final class Employee: ManagedObject {
    override func awakeFromFetch() {
        super.awakeFromFetch()
        let first = value(forKey: "firstName") as? String ?? ""
        let last = value(forKey: "lastName") as? String ?? ""
        setPrimitiveValue("\(first) \(last)", forKey: "fullName")
    }
}

/// The undo conflict `body` throws (object, property, expected, found), or nil with a
/// recorded issue when it throws none or another error.
func expectUndoConflict(_ body: () throws -> Void) -> (object: String, property: String, expected: String, found: String)? {
    do {
        try body()
        Issue.record("expected an undo conflict, got none")
    } catch ContextError.undoConflict(let object, let property, let expected, let found) {
        return (object, property, expected, found)
    } catch {
        Issue.record("expected an undo conflict, got \(error)")
    }
    return nil
}

/// ``openCoordinator(_:model:classes:)`` for a model that drops entities or properties of the
/// store's on purpose: allowed, so the store migrates to it (spec 0004 §4.7).
func openCoordinatorRemoving(_ directory: TemporaryDirectory, model: ManagedObjectModel) throws -> PersistentStoreCoordinator {
    let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
    var configuration = EventLog.Configuration()
    configuration.allowsRemovingEntitiesAndProperties = true
    try coordinator.addPersistentStore(type: .eventLog, at: directory.url.appendingPathComponent("store"), configuration: configuration)
    return coordinator
}
