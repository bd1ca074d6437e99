import Foundation
import Strata
import StrataLog
import StrataTestSupport
import Synchronization
import Testing

/// A staged migration killed (SIGKILL) at a point of its run, in a `StrataContextProbe
/// staged` process, then added again here (spec 0006 §19.6): the store ends at the last
/// model with every handler's work done once over, whatever the point.
///
///   STRATA_STAGED_KILL_ROUNDS  kills (default 3); rounds of two processes at once: one fewer
@Suite("Contexts: staged migration after a crash")
struct StagedMigrationCrashTests {
    static let rounds = max(1, Int(ProcessInfo.processInfo.environment["STRATA_STAGED_KILL_ROUNDS"] ?? "") ?? 3)
    static let people = 45

    /// The probe's manager (`Tests/StrataContextProbe/Staged.swift`), this target's copy:
    /// the willMigrate handler trims the names, the didMigrate one splits them ten a save.
    static func manager() throws -> StagedMigrationManager {
        let stage = CustomMigrationStage(migratingFrom: try StagedPeopleModels.version(1), to: try StagedPeopleModels.version(2), label: "split")
        stage.willMigrateHandler = { manager, _ in
            let container = try #require(manager.container)
            try container.newBackgroundContext().performAndWait { context in
                for person in try context.fetch(FetchRequest(entityName: "Person")) {
                    let name = person.value(forKey: "name") as? String ?? ""
                    let trimmed = name.trimmingCharacters(in: .whitespaces)
                    if trimmed != name { person.setValue(trimmed, forKey: "name") }
                }
                try context.save()
            }
        }
        stage.didMigrateHandler = { manager, _ in
            let container = try #require(manager.container)
            while try container.newBackgroundContext().performAndWait({ context in
                var request = FetchRequest(entityName: "Person", predicate: try FormatPredicate(format: "firstName == nil"))
                request.fetchLimit = 10
                let people = try context.fetch(request)
                for person in people {
                    let (first, last) = StagedPeopleModels.split(person.value(forKey: "name") as? String ?? "")
                    person.setValue(first, forKey: "firstName")
                    person.setValue(last, forKey: "lastName")
                }
                try context.save()
                return !people.isEmpty
            }) {}
        }
        return StagedMigrationManager([.custom(stage)])
    }

    static func name(_ index: Int) -> String { index.isMultiple(of: 4) ? "  Given\(index) Family \(index) " : "Given\(index) Family\(index)" }

    @Test("SIGKILL at any point of a staged migration (handlers saving in batches, the marker, each step's migration): the next add finishes it — every name split once, the store at the last model, no marker left, verify clean")
    func killedMidMigration() throws {
        var random = UInt64(0x5EED_57A6)
        var kills = 0
        for round in 0..<Self.rounds {
            let dir = try TemporaryDirectory()
            let url = dir.url.appendingPathComponent("store")
            try Self.makeVersion1Store(url)

            // Kill after line `stop` (start, will, batch 1…5, did, loaded) and a few hundred µs more.
            random = random &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            let stop = Int((random >> 33) % 9) + 1
            let extra = UInt32((random >> 13) % 800)
            let process = ChildProcess()
            process.executableURL = BuildProducts.executable("StrataContextProbe")
            process.arguments = ["staged", url.path]
            let output = Pipe()
            process.standardOutput = output
            process.standardError = FileHandle.nullDevice
            try process.run()
            var seen: [String] = []
            var buffer = Data()
            reading: while seen.count < stop {
                let chunk = output.fileHandleForReading.availableData
                if chunk.isEmpty { break }
                buffer.append(chunk)
                while let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                    seen.append(String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self))
                    buffer.removeSubrange(buffer.startIndex...newline)
                    if seen.count >= stop { break reading }
                }
            }
            usleep(extra)
            if process.isRunning { _ = kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
            let context = "round \(round): killed after \(seen.last ?? "nothing") + \(extra) µs"
            if process.terminationReason == .exit {
                #expect(process.terminationStatus == 0, "\(context): the probe failed")
            } else {
                kills += 1
            }
            if ProcessInfo.processInfo.environment["STRATA_STAGED_KILL_TRACE"] != nil { print(context, process.terminationReason == .exit ? "exited" : "killed") }

            let container = PersistentContainer(name: "People", managedObjectModel: try StagedPeopleModels.version(3), storeURL: url)
            container.persistentStoreDescriptions.first?.stagedMigrationManager = try Self.manager()
            try container.loadPersistentStores()
            let rows = try container.newBackgroundContext().performAndWait { context in
                try context.fetch(FetchRequest(entityName: "Person")).map {
                    [$0.value(forKey: "firstName") as? String ?? "nil", $0.value(forKey: "lastName") as? String ?? "nil"]
                }
            }
            let expected = (0..<Self.people).map { index in
                let (first, last) = StagedPeopleModels.split(Self.name(index))
                return [first, last]
            }
            #expect(rows.sorted { $0.lexicographicallyPrecedes($1) } == expected.sorted { $0.lexicographicallyPrecedes($1) }, "\(context)")
            let log = try EventLog(openingExistingAt: url.path)
            #expect(log.model.versionIdentifiers == ["3"], "\(context)")
            #expect(try log.stagedMigrationMarker() == nil, "\(context)")
            let report = try log.verify()
            #expect(report.isClean, "\(context): \(report.problems.prefix(5))")
        }
        #expect(Self.rounds < 3 || kills > 0, "no round killed the probe mid-migration")
    }

    /// A version-1 people store at `url` with ``people`` names.
    static func makeVersion1Store(_ url: URL) throws {
        let v1 = PersistentContainer(name: "People", managedObjectModel: try StagedPeopleModels.version(1), storeURL: url)
        try v1.loadPersistentStores()
        try v1.newBackgroundContext().performAndWait { context in
            for index in 0..<Self.people {
                try context.insertNewObject(forEntityName: "Person").setValue(Self.name(index), forKey: "name")
            }
            try context.save()
        }
        try v1.persistentStoreCoordinator.remove(try #require(v1.persistentStoreCoordinator.persistentStores.first))
    }

    @Test("two processes adding one store with a staged migration at once (an app and its extension after an update): one migrates, running each handler once; the other waits and finds the store migrated (before, only adds in one process excluded each other: both ran the handlers, at the same time)")
    func twoProcessesAtOnce() throws {
        for round in 0..<max(1, Self.rounds - 1) {
            let dir = try TemporaryDirectory()
            let url = dir.url.appendingPathComponent("store")
            try Self.makeVersion1Store(url)
            let probes = (0..<2).map { _ in
                let process = ChildProcess()
                process.executableURL = BuildProducts.executable("StrataContextProbe")
                process.arguments = ["staged", url.path]
                let output = Pipe()
                process.standardOutput = output
                let errors = Pipe()
                process.standardError = errors
                return (process, output, errors)
            }
            for (process, _, _) in probes { try process.run() }
            var lines: [String] = []
            for (process, output, errors) in probes {
                let data = output.fileHandleForReading.readDataToEndOfFile()
                let problem = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
                process.waitUntilExit()
                #expect(process.terminationStatus == 0, "round \(round): \(problem)")
                lines += String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init)
            }
            #expect(lines.filter { $0 == "will" }.count == 1, "round \(round): \(lines)")
            #expect(lines.filter { $0 == "did" }.count == 1, "round \(round): \(lines)")
            #expect(lines.filter { $0 == "loaded" }.count == 2, "round \(round): \(lines)")
            let container = PersistentContainer(name: "People", managedObjectModel: try StagedPeopleModels.version(3), storeURL: url)
            try container.loadPersistentStores()
            let count = try container.newBackgroundContext().performAndWait { context in try context.count(for: FetchRequest(entityName: "Person")) }
            #expect(count == Self.people, "round \(round)")
        }
    }
}
