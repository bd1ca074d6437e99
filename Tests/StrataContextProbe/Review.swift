import Foundation
import Strata
import StrataStorage
import StrataTestSupport

/// Modes for `MultiProcessReviewTests` (the league store, `SeedModels.leagueManager`):
///
///   StrataContextProbe set STORE URI KEY VALUE [KEY VALUE…]
///       sets the object's string attributes (VALUE "-" is nil) in one save, author "probe";
///       prints "saved SEQ"
///   StrataContextProbe insert STORE NAME       inserts a team NAME; prints "saved SEQ URI"
///   StrataContextProbe purge STORE THROUGH     compacts all but the newest event, then purges
///                                              history through THROUGH; prints "purged THROUGH"
///   StrataContextProbe loop STORE URI          renames the team "n K" for K = 1, 2, … one save
///                                              each, printing "ack K SEQ" after each, until killed
///   StrataContextProbe die STORE URI NAME      renames the team NAME in one save and dies by
///                                              SIGKILL right after LMDB writes the commit's meta
///                                              page, before it publishes it (KilledWriter.swift);
///                                              prints "survived SEQ" and exits 3 if it didn't die
///   StrataContextProbe stall STORE URI NAME    as `die`, but stops (SIGSTOP) there instead, holding
///                                              LMDB's writer lock with the commit unpublished;
///                                              prints "stalling" first, and "saved SEQ" once
///                                              continued (SIGCONT) and the save is done
///   StrataContextProbe publish-wait STORE SECONDS
///       sets this process's writer lock wait policy (as `strata compact --wait SECONDS` does;
///       announced after 0.2 s: "waiting PID"), prints "ready HEAD"; then for each line on
///       standard input reads the head: "head N", or "failed ERROR"
func runReview(_ arguments: [String]) -> Never {
    do {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try SeedModels.leagueManager)
        let store = try coordinator.addPersistentStore(type: .eventLog, at: URL(fileURLWithPath: arguments[1]))
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator, name: "probe", transactionAuthor: "probe")
        func object(_ text: String) throws -> ManagedObjectID {
            guard let uri = URL(string: text), let id = coordinator.managedObjectID(forURIRepresentation: uri) else {
                fail("not an object of this store: \(text)")
            }
            return id
        }
        switch arguments[0] {
        case "set":
            guard arguments.count >= 5, arguments.count % 2 == 1 else { fail("set needs STORE URI KEY VALUE…") }
            let id = try object(arguments[2])
            let pairs = stride(from: 3, to: arguments.count, by: 2).map { (arguments[$0], arguments[$0 + 1]) }
            let sequence = try context.performAndWait { (context: isolated ManagedObjectContext) throws in
                let target = try context.existingObject(with: id)
                for (key, value) in pairs { target.setValue(value == "-" ? nil : value, forKey: key) }
                try context.save()
                return try store.log.head
            }
            say("saved \(sequence)")
        case "insert":
            guard arguments.count == 3 else { fail("insert needs STORE NAME") }
            let (sequence, id) = try context.performAndWait { (context: isolated ManagedObjectContext) throws in
                let team = try context.insertNewObject(forEntityName: "Team")
                team.setValue(arguments[2], forKey: "name")
                try context.save()
                return (try store.log.head, team.objectID)
            }
            say("saved \(sequence) \(id)")
        case "purge":
            guard arguments.count == 3, let through = UInt64(arguments[2]) else { fail("purge needs STORE THROUGH") }
            let head = try store.log.head
            if head > 1 { _ = try store.log.compact(CompactionRequest(before: head)) }
            try store.log.purge(through: through, author: "probe")
            say("purged \(through)")
        case "loop":
            guard arguments.count == 3 else { fail("loop needs STORE URI") }
            let id = try object(arguments[2])
            var k = 0
            while true {
                k += 1
                let name = "n \(k)"
                let sequence = try context.performAndWait { (context: isolated ManagedObjectContext) throws in
                    try context.existingObject(with: id).setValue(name, forKey: "name")
                    try context.save()
                    return try store.log.head
                }
                say("ack \(k) \(sequence)")
            }
        case "die":
            guard arguments.count == 4 else { fail("die needs STORE URI NAME") }
            let id = try object(arguments[2])
            let sequence = try context.performAndWait { (context: isolated ManagedObjectContext) throws in
                try context.existingObject(with: id).setValue(arguments[3], forKey: "name")
                try killAfterNextMetaWrite()
                try context.save()
                return try store.log.head
            }
            say("survived \(sequence)")
            exit(3)
        case "stall":
            guard arguments.count == 4 else { fail("stall needs STORE URI NAME") }
            let id = try object(arguments[2])
            let sequence = try context.performAndWait { (context: isolated ManagedObjectContext) throws in
                try context.existingObject(with: id).setValue(arguments[3], forKey: "name")
                try stopAfterNextMetaWrite()
                say("stalling")
                try context.save()
                return try store.log.head
            }
            say("saved \(sequence)")
        case "publish-wait":
            guard arguments.count == 3, let seconds = Double(arguments[2]) else { fail("publish-wait needs STORE SECONDS") }
            LMDBEnvironment.setWriterLockWait(WriterLockWait(timeout: seconds, announceAfter: 0.2) { holder in say("waiting \(holder.processID)") })
            let head = try store.log.head
            say("ready \(head)")
            while readLine() != nil {
                do {
                    let now = try store.log.head
                    say("head \(now)")
                } catch {
                    say("failed \(error)")
                }
            }
        default:
            fail("unknown command \(arguments[0])")
        }
        exit(0)
    } catch {
        fail("\(error)")
    }
}
