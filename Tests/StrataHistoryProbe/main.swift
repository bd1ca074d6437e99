// A second process for the history tests: writes transactions to a store through a context,
// so the live feed and the store monitor are tested against commits they didn't make.
//
//   StrataHistoryProbe write STORE COUNT [AUTHOR]
//   StrataHistoryProbe purge STORE THROUGH
//
// Opens the store at STORE with `SeedModels.people` (creating it if needed), prints
// "ready HEAD", then saves COUNT transactions, each inserting one Person:
//
//   transaction k (1…COUNT): Person {email: "AUTHOR-k@probe.test", firstName: "probe",
//                            lastName: AUTHOR, age: k % 90}, saved by a context named
//                            "probe" with transactionAuthor AUTHOR (default "probe")
//
// and prints "done COUNT". `purge` opens the store and purges its history through THROUGH
// (author "probe"), printing "purged THROUGH". Errors go to standard error with exit
// status 1.
import Foundation
import Strata
import StrataTestSupport

func say(_ text: String) {
    FileHandle.standardOutput.write(Data((text + "\n").utf8))
}

func fail(_ text: String) -> Never {
    FileHandle.standardError.write(Data("StrataHistoryProbe: \(text)\n".utf8))
    exit(1)
}

let arguments = Array(CommandLine.arguments.dropFirst())
if arguments.count == 3, arguments[0] == "purge" {
    guard let through = UInt64(arguments[2]) else { fail("purge: THROUGH must be a sequence number, not \(arguments[2])") }
    do {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: try SeedModels.people)
        let store = try coordinator.addPersistentStore(type: .eventLog, at: URL(fileURLWithPath: arguments[1]))
        try store.log.purge(through: through, author: "probe")
        say("purged \(through)")
        exit(0)
    } catch {
        fail("\(error)")
    }
}
guard arguments.count >= 3, arguments[0] == "write", let count = Int(arguments[2]), count >= 0 else {
    fail("usage: StrataHistoryProbe write STORE COUNT [AUTHOR] | purge STORE THROUGH")
}
let store = arguments[1]
let author = arguments.count > 3 ? arguments[3] : "probe"

do {
    let coordinator = PersistentStoreCoordinator(managedObjectModel: try SeedModels.people)
    try coordinator.addPersistentStore(type: .eventLog, at: URL(fileURLWithPath: store))
    let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator, name: "probe", transactionAuthor: author)
    context.performAndWait { (context: isolated ManagedObjectContext) in context.isUndoEnabled = false }
    say("ready \(try coordinator.currentHistoryToken().sequence)")
    if count > 0 {
        for k in 1...count {
            try context.performAndWait { (context: isolated ManagedObjectContext) throws in
                let person = try context.insertNewObject(forEntityName: "Person")
                person.setValue("\(author)-\(k)@probe.test", forKey: "email")
                person.setValue("probe", forKey: "firstName")
                person.setValue(author, forKey: "lastName")
                person.setValue(Int32(k % 90), forKey: "age")
                try context.save()
            }
        }
    }
    say("done \(count)")
} catch {
    fail("\(error)")
}
