import Foundation
import Strata
import StrataPredicate
import StrataTestSupport
import Testing

// MARK: - Review (session 29): value semantics — NaN, literal strings, counts, sorts, joins

/// "é" precomposed (NFC, U+00E9) and decomposed ("e" U+0301): equal as Swift strings, not
/// as Core Data's `isEqual:` finds them.
private let composed = "\u{E9}"
private let decomposed = "e\u{301}"

private func scalars(_ value: Any?) -> [UInt32]? {
    (value as? String).map { $0.unicodeScalars.map(\.value) }
}

@Suite("Value semantics: NaN, literal string compares, count(for:) of rows, [c] sorts, joins through custom classes")
struct ValueSemanticsFixTests {
    /// `Reading`: doubles and a float, a unique double `code`, a string `name`.
    static var readings: ManagedObjectModel {
        get throws {
            try ManagedObjectModel {
                Entity("Reading") {
                    Attribute("value", .double)
                    Attribute("ratio", .float)
                    Attribute("code", .double)
                    Attribute("name", .string)
                    Unique("code")
                }
            }
        }
    }

    func log(_ coordinator: PersistentStoreCoordinator) -> EventLog { coordinator.persistentStores[0].log }

    /// A store with one reading holding NaN in `value` and `ratio`; its ID.
    func nanStore(_ dir: TemporaryDirectory) async throws -> (PersistentStoreCoordinator, ManagedObjectID) {
        let coordinator = try openCoordinator(dir, model: try Self.readings)
        let id = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let reading = try context.insertNewObject(forEntityName: "Reading")
            reading.setValue(Double.nan, forKey: "value")
            reading.setValue(Float.nan, forKey: "ratio")
            try context.save()
            return reading.objectID
        }
        return (coordinator, id)
    }

    // MARK: NaN set over NaN

    @Test("NaN set over a stored NaN is no change: nothing to save, undo or log (NSNumber's isEqual: finds NaN equal to NaN)")
    func nanOverNanIsNoChange() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, id) = try await nanStore(dir)
        let before = try head(coordinator)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            context.isUndoEnabled = true
            let reading = try context.existingObject(with: id)
            reading.setValue(Double.nan, forKey: "value")
            reading.setValue(Float.nan, forKey: "ratio")
            // Another NaN (a payload, the sign bit): still NaN, as NSNumber finds it.
            reading.setValue(-Double(nan: 7, signaling: false), forKey: "value")
            #expect(!reading.hasChanges, "\(reading.changedValues())")
            #expect(reading.changedValues().isEmpty)
            let contextChanged = context.hasChanges
            #expect(!contextChanged)
            context.processPendingChanges()
            let canUndo = context.canUndo
            #expect(!canUndo, "an undo group that changes nothing")
            try context.save()
        }
        #expect(try head(coordinator) == before, "no event for a set that changes nothing")
        // A real change from NaN and back is saved, and the log verifies clean.
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let reading = try context.existingObject(with: id)
            reading.setValue(1.5, forKey: "value")
            #expect(reading.hasChanges)
            try context.save()
            reading.setValue(Double.nan, forKey: "value")
            try context.save()
        }
        #expect(try head(coordinator) == before + 2)
    }

    @Test("a store where a value changed from NaN verifies clean (replay's before-image check took NaN for another value)")
    func verifyAfterChangeFromNaN() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, id) = try await nanStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let reading = try context.existingObject(with: id)
            reading.setValue(2.0, forKey: "value")
            reading.setValue(Float(0.5), forKey: "ratio")
            try context.save()
        }
        let report = try log(coordinator).verify()
        #expect(report.isClean, "\(report)")
    }

    // MARK: NaN under a uniqueness constraint

    @Test("a NaN under a uniqueness constraint constrains nothing, as nil doesn't (Core Data's SQLite store holds NaN as NULL): in one save, against a stored NaN, in a batch upsert")
    func nanDoesNotConstrain() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.readings)
        // Two new objects with NaN, in one save (before, the store's index refused the
        // second: its NaN had the first's key, though the context saw no conflict).
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            for name in ["a", "b"] {
                let reading = try context.insertNewObject(forEntityName: "Reading")
                reading.setValue(Double.nan, forKey: "code")
                reading.setValue(name, forKey: "name")
            }
            try context.save()
        }
        // Another, later, against the stored ones; a number still clashes with a number.
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let c = try context.insertNewObject(forEntityName: "Reading")
            c.setValue(Double.nan, forKey: "code")
            c.setValue("c", forKey: "name")
            try context.save()
            try context.insertNewObject(forEntityName: "Reading").setValue(1.0, forKey: "code")
            try context.save()
            try context.insertNewObject(forEntityName: "Reading").setValue(1.0, forKey: "code")
            #expect(throws: ContextError.self) { try context.save() }
            context.rollback()
        }
        // A batch upsert of a NaN row inserts: no stored object holds "its" value (before,
        // it updated the stored NaN object with the same bits).
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            context.mergePolicy = StandardMergePolicy.mergeByPropertyObjectTrump
            let request = BatchInsertRequest(entityName: "Reading", objects: [["code": Double.nan, "name": "batch"]])
            _ = try context.execute(request)
            let names = try context.fetch(FetchRequest(entityName: "Reading")).compactMap { $0.value(forKey: "name") as? String }
            #expect(names.sorted() == ["a", "b", "batch", "c"], "\(names)")
        }
        #expect(try log(coordinator).verify().isClean)
    }

    // MARK: Literal compares where a value was re-encoded

    /// A people store with one person whose first name is "x"; its ID.
    func personStore(_ dir: TemporaryDirectory) async throws -> (PersistentStoreCoordinator, ManagedObjectID) {
        let coordinator = try openCoordinator(dir, model: try SeedModels.people)
        let id = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let person = try context.insertNewObject(forEntityName: "Person")
            person.setValue("x", forKey: "firstName")
            try context.save()
            return person.objectID
        }
        return (coordinator, id)
    }

    @Test("undo of a saved change the store no longer holds, only re-encoded by another writer (\"é\" decomposed to precomposed), is a conflict")
    func undoOverReencodedValueConflicts() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, id) = try await personStore(dir)
        let editor = privateContext(coordinator)
        try await editor.perform { (context: isolated ManagedObjectContext) throws in
            context.isUndoEnabled = true
            try context.existingObject(with: id).setValue(decomposed, forKey: "firstName")
            try context.save()
        }
        // Another writer normalizes it: a change (Core Data's isEqual: and Strata's change
        // detection compare literally).
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: id).setValue(composed, forKey: "firstName")
            try context.save()
        }
        let before = try head(coordinator)
        try await editor.perform { (context: isolated ManagedObjectContext) throws in
            let conflict = expectUndoConflict {
                try context.undo()
                try context.save()
            }
            #expect(conflict?.property == "firstName", "\(String(describing: conflict))")
            context.rollback()
        }
        #expect(try head(coordinator) == before, "the other writer's value was overwritten")
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(scalars(try context.existingObject(with: id).value(forKey: "firstName")) == scalars(composed))
        }
    }

    @Test("an open undo group that only re-encodes a value is something to undo (canUndo)")
    func openGroupReencodingCanUndo() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, id) = try await personStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: id).setValue(composed, forKey: "firstName")
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            context.isUndoEnabled = true
            let person = try context.existingObject(with: id)
            person.setValue(decomposed, forKey: "firstName")
            #expect(person.hasChanges)
            // The group is still open: before, its change compared equal (canonically) to
            // the value it replaces, and the context said there was nothing to undo.
            let canUndo = context.canUndo
            #expect(canUndo)
            try context.undo()
            #expect(scalars(person.value(forKey: "firstName")) == scalars(composed))
        }
    }

    @Test("revert of a transaction whose value another writer only re-encoded since is a conflict, not a silent overwrite")
    func revertOverReencodedValueConflicts() async throws {
        let dir = try TemporaryDirectory()
        let (coordinator, id) = try await personStore(dir)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: id).setValue(decomposed, forKey: "firstName")
            try context.save()
        }
        let reverted = try head(coordinator)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            try context.existingObject(with: id).setValue(composed, forKey: "firstName")
            try context.save()
        }
        let before = try head(coordinator)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let token = HistoryToken(storeIdentifier: try #require(coordinator.persistentStores.first).identifier, sequence: reverted)
            _ = expectUndoConflict {
                try context.revertTransaction(at: token)
                try context.save()
            }
            context.rollback()
        }
        #expect(try head(coordinator) == before)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            #expect(scalars(try context.existingObject(with: id).value(forKey: "firstName")) == scalars(composed))
        }
    }

    @Test("a uniqueness merge whose winning value only re-encodes the stored one writes it, and its undo puts the stored encoding back")
    func uniquenessMergeReencodes() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.people)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let person = try context.insertNewObject(forEntityName: "Person")
            person.setValue("a@example.com", forKey: "email")
            person.setValue(composed, forKey: "firstName")
            try context.save()
        }
        let merger = privateContext(coordinator)
        try await merger.perform { (context: isolated ManagedObjectContext) throws in
            context.isUndoEnabled = true
            context.mergePolicy = StandardMergePolicy.mergeByPropertyObjectTrump
            let person = try context.insertNewObject(forEntityName: "Person")
            person.setValue("a@example.com", forKey: "email")
            person.setValue(decomposed, forKey: "firstName")
            try context.save()
        }
        func stored() async throws -> [[UInt32]?] {
            try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
                try context.fetch(FetchRequest(entityName: "Person")).map { scalars($0.value(forKey: "firstName")) }
            }
        }
        // Before, the merge skipped the set (canonically equal) and the stored encoding stayed.
        #expect(try await stored() == [scalars(decomposed)])
        try await merger.perform { (context: isolated ManagedObjectContext) throws in
            try context.undo()
            try context.save()
        }
        #expect(try await stored() == [scalars(composed)], "the undo puts the encoding the merge replaced back")
    }

    // MARK: count(for:) counts the rows a fetch returns

    @Test("count(for:) of a distinct, grouped or having dictionary request is the number of rows fetch returns")
    func countOfRows() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.readings)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            for (index, name) in ["a", "a", "b", "b", "b", "c"].enumerated() {
                let reading = try context.insertNewObject(forEntityName: "Reading")
                reading.setValue(name, forKey: "name")
                reading.setValue(Double(index), forKey: "code")
            }
            try context.save()
            var distinct = FetchRequest(entityName: "Reading")
            distinct.resultType = .dictionary
            distinct.propertiesToFetch = ["name"]
            distinct.returnsDistinctResults = true
            var grouped = FetchRequest(entityName: "Reading")
            grouped.resultType = .dictionary
            grouped.propertiesToFetch = ["name", .expression(name: "n", .count, keyPath: "code")]
            grouped.propertiesToGroupBy = ["name"]
            var having = grouped
            having.havingPredicate = try FormatPredicate(format: "n > 1")
            var limited = distinct
            limited.fetchOffset = 1
            var aggregate = FetchRequest(entityName: "Reading")
            aggregate.resultType = .dictionary
            aggregate.propertiesToFetch = [.expression(name: "total", .sum, keyPath: "code")]
            var plain = FetchRequest(entityName: "Reading")
            plain.resultType = .dictionary
            plain.propertiesToFetch = ["name"]
            for (request, rows) in [(distinct, 3), (grouped, 3), (having, 2), (limited, 2), (aggregate, 1), (plain, 6)] {
                let fetched = try context.fetchDictionaries(request)
                #expect(fetched.count == rows, "\(fetched)")
                #expect(try context.count(for: request) == fetched.count, "\(request)")
            }
            // Unsaved changes count as fetch sees them.
            try context.insertNewObject(forEntityName: "Reading").setValue("d", forKey: "name")
            #expect(try context.count(for: distinct) == 4)
        }
    }

    // MARK: Case-insensitive sorts order as [c] predicates compare

    @Test("a case- or diacritic-insensitive sort orders strings as <[c] / <[cd] compare them (fold both, then as without options)")
    func insensitiveSortAgreesWithPredicates() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try Self.readings)
        let names = ["f", composed, decomposed, "E", "e", "ß", "SS", "st", "ſ", "t", "ı", "I", "i", "İ", "ﬀ", "fg", "Z", "\u{FF5E}", "\u{1F600}", "é2", "é10"]
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            for (index, name) in names.enumerated() {
                let reading = try context.insertNewObject(forEntityName: "Reading")
                reading.setValue(name, forKey: "name")
                reading.setValue(Double(index), forKey: "code")
            }
            try context.save()
            for (options, predicateOptions) in [((true, false), "c"), ((false, true), "d"), ((true, true), "cd")] {
                var request = FetchRequest(entityName: "Reading")
                request.sortDescriptors = [FetchSortDescriptor(key: "name", ascending: true, caseInsensitive: options.0, diacriticInsensitive: options.1)]
                let sorted = try context.fetch(request).compactMap { $0.value(forKey: "name") as? String }
                #expect(sorted.count == names.count)
                // Every string sorts no later than the next, as the predicate compares them.
                let ordered = try FormatPredicate(format: "SELF[FIRST] <=[\(predicateOptions)] SELF[LAST]")
                for (a, b) in zip(sorted, sorted.dropFirst()) {
                    #expect(try ordered.evaluate(with: [a, b]), "[\(predicateOptions)] sorted \(scalars(a) ?? []) before \(scalars(b) ?? []): \(sorted)")
                }
            }
            // Numeric too: digits by value, the rest folded and in Unicode order.
            var standard = FetchRequest(entityName: "Reading", predicate: try FormatPredicate(format: "name IN %@", ["f", "é2", "é10", "E"]))
            standard.sortDescriptors = [FetchSortDescriptor.localizedStandard(key: "name")]
            let sorted = try context.fetch(standard).compactMap { $0.value(forKey: "name") as? String }
            #expect(sorted == ["E", "f", "é2", "é10"], "\(sorted)")
        }
    }
}

