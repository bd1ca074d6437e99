import Foundation
@testable import Strata
@testable import StrataLog
import StrataTestSupport
import Testing

/// Session 31 fixes: a removed attribute added back (spec 0004 §4.7), NaN dates in sorts and
/// min/max (spec 0008), grouping of canonically equivalent strings (spec 0008), and as-of
/// reads before a paired side's fill (spec 0004 §4.1).
@Suite("Model versions adding back, NaN dates, grouped strings, as-of before a paired side's fill", .serialized)
struct ModelAndAggregateFixTests {
    // MARK: - A removed attribute added back

    static func player(nickname: String?) throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Player") {
                Attribute("name", .string)
                if let nickname { Attribute("nickname", .string, default: .string(nickname)) }
            }
        }
    }

    static func nicknames(_ coordinator: PersistentStoreCoordinator) async throws -> [String] {
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var request = FetchRequest(entityName: "Player")
            request.sortDescriptors = [FetchSortDescriptor(key: "name")]
            return try context.fetch(request).map {
                "\($0.value(forKey: "name") as? String ?? "?")=\($0.value(forKey: "nickname") as? String ?? "nil")"
            }
        }
    }

    static func insertPlayer(_ coordinator: PersistentStoreCoordinator, _ name: String) async throws {
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let player = try context.insertNewObject(forEntityName: "Player")
            player.setValue(name, forKey: "name")
            try context.save()
        }
    }

    @Test("an attribute a version removed, added back with only a default (the first version's hash), is a new version: existing objects take the default, as Core Data's lightweight migration gives them")
    func removedAttributeAddedBack() async throws {
        let dir = try TemporaryDirectory()
        let path = dir.url.appendingPathComponent("store").path
        try await Self.insertPlayer(try openCoordinator(dir, model: try Self.player(nickname: "x")), "Ada")
        try await Self.insertPlayer(try openCoordinatorRemoving(dir, model: try Self.player(nickname: nil)), "Bob")
        #expect(try EventLog(openingExistingAt: path).modelVersion == 2)

        let third = try openCoordinator(dir, model: try Self.player(nickname: "y"))
        #expect(third.persistentStores[0].log.modelVersion == 3, "a new version, not version 1 again")
        #expect(try await Self.nicknames(third) == ["Ada=y", "Bob=y"])
        let log = try EventLog(openingExistingAt: path)
        #expect(log.modelVersion == 3)
        #expect(log.storedModels().count == 3)

        // The version that removed it is an earlier app's model now: it opens as itself,
        // and what it writes is migrated at the next open of version 3.
        let second = try openCoordinator(dir, model: try Self.player(nickname: nil))
        #expect(second.persistentStores[0].log.modelVersion == 2)
        try await Self.insertPlayer(second, "Cy")
        let again = try openCoordinator(dir, model: try Self.player(nickname: "y"))
        #expect(again.persistentStores[0].log.modelVersion == 3)
        #expect(try await Self.nicknames(again) == ["Ada=y", "Bob=y", "Cy=y"])
        #expect(try EventLog(openingExistingAt: path).storedModels().count == 3, "no version stored on each open")
        #expect(try again.persistentStores[0].log.verify().isClean)
    }

    @Test("an earlier stored version that lacks what the newest has still opens as itself (an earlier app's), adding back nothing")
    func earlierVersionStillOpensAsItself() async throws {
        let dir = try TemporaryDirectory()
        func model(_ extra: Bool) throws -> ManagedObjectModel {
            try ManagedObjectModel {
                Entity("Player") {
                    Attribute("name", .string)
                    if extra { Attribute("club", .string) }
                }
            }
        }
        try await Self.insertPlayer(try openCoordinator(dir, model: try model(false)), "Ada")
        try await Self.insertPlayer(try openCoordinator(dir, model: try model(true)), "Bob")
        let earlier = try openCoordinator(dir, model: try model(false))
        #expect(earlier.persistentStores[0].log.modelVersion == 1)
        #expect(earlier.persistentStores[0].log.storedModels().count == 2)
    }

    // MARK: - NaN dates

    static let nanDate = Date(timeIntervalSinceReferenceDate: .nan)

    static func eventModel() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Team") {
                Attribute("name", .string)
                Relationship("events", to: "Event", inverse: "team", toMany: true)
            }
            Entity("Event") {
                Attribute("label", .string)
                Attribute("day", .date, indexed: true)
                Relationship("team", to: "Team", inverse: "events")
            }
        }
    }

    /// Events of one team on the given days.
    static func seedEvents(_ dir: TemporaryDirectory, _ days: [Date]) async throws -> PersistentStoreCoordinator {
        let coordinator = try openCoordinator(dir, model: try eventModel())
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let team = try context.insertNewObject(forEntityName: "Team")
            team.setValue("Otters", forKey: "name")
            for (index, day) in days.enumerated() {
                let event = try context.insertNewObject(forEntityName: "Event")
                event.setValue("e\(index)", forKey: "label")
                event.setValue(day, forKey: "day")
                event.setValue(team, forKey: "team")
            }
            try context.save()
        }
        return coordinator
    }

    static func interval(_ value: Any?) -> Double? { (value as? Date)?.timeIntervalSinceReferenceDate }

    /// The events' days sorted by a fetch ("nan" for a NaN date).
    static func sortedDays(_ context: isolated ManagedObjectContext, ascending: Bool, limit: Int) throws -> [String] {
        var request = FetchRequest(entityName: "Event")
        request.sortDescriptors = [FetchSortDescriptor(key: "day", ascending: ascending)]
        request.fetchLimit = limit
        return try context.fetch(request).map { object in
            let value = Self.interval(object.value(forKey: "day"))
            return value.map { $0.isNaN ? "nan" : "\(Int($0))" } ?? "nil"
        }
    }

    @Test("derived @min/@max over numbers and dates holding NaN: NaN after every value (max is NaN, min the least), whatever the members' order")
    func derivedExtremesOverNaN() async throws {
        let model = try ManagedObjectModel {
            Entity("Team") {
                Attribute("name", .string)
                Relationship("games", to: "Game", inverse: "team", toMany: true, ordered: true)
                Attribute("best", .double).derived(from: "games.@max.score")
                Attribute("worst", .double).derived(from: "games.@min.score")
                Attribute("latest", .date).derived(from: "games.@max.day")
                Attribute("earliest", .date).derived(from: "games.@min.day")
            }
            Entity("Game") {
                Attribute("score", .double)
                Attribute("day", .date)
                Relationship("team", to: "Team", inverse: "games")
            }
        }
        for nanFirst in [true, false] {
            let dir = try TemporaryDirectory()
            let coordinator = try openCoordinator(dir, model: model)
            try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
                let team = try context.insertNewObject(forEntityName: "Team")
                team.setValue("Otters", forKey: "name")
                var games: [ManagedObject] = []
                let values: [(Double, Double)] = nanFirst ? [(.nan, .nan), (3, 100), (1, 50)] : [(3, 100), (1, 50), (.nan, .nan)]
                for (score, day) in values {
                    let game = try context.insertNewObject(forEntityName: "Game")
                    game.setValue(score, forKey: "score")
                    game.setValue(Date(timeIntervalSinceReferenceDate: day), forKey: "day")
                    games.append(game)
                }
                team.setValue(games, forKey: "games")
                try context.save()
            }
            try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
                let team = try #require(try context.fetch(FetchRequest(entityName: "Team")).first)
                #expect((team.value(forKey: "best") as? Double)?.isNaN == true, "NaN first: \(nanFirst)")
                #expect(team.value(forKey: "worst") as? Double == 1, "NaN first: \(nanFirst)")
                let (latest, earliest) = (Self.interval(team.value(forKey: "latest")), Self.interval(team.value(forKey: "earliest")))
                #expect(latest?.isNaN == true, "NaN first: \(nanFirst)")
                #expect(earliest == 50, "NaN first: \(nanFirst)")
            }
        }
    }

    @Test("a NaN date sorts after every date (before every date descending) and is the max, min the earliest date, wherever it stands: fetch sorts, index walks, dictionary min/max, @min/@max")
    func nanDates() async throws {
        let orders: [[Date]] = [
            [Self.nanDate, Date(timeIntervalSinceReferenceDate: 100), Date(timeIntervalSinceReferenceDate: 50)],
            [Date(timeIntervalSinceReferenceDate: 100), Date(timeIntervalSinceReferenceDate: 50), Self.nanDate],
            [Date(timeIntervalSinceReferenceDate: 100), Date(timeIntervalSinceReferenceDate: -.nan), Date(timeIntervalSinceReferenceDate: 50)],
        ]
        for days in orders {
            // (Foundation's Date.description traps on a NaN date: the intervals name the case.)
            let label = Comment(rawValue: "\(days.map(\.timeIntervalSinceReferenceDate))")
            let dir = try TemporaryDirectory()
            let coordinator = try await Self.seedEvents(dir, days)
            try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
                #expect(try Self.sortedDays(context, ascending: true, limit: 0) == ["50", "100", "nan"], label)
                #expect(try Self.sortedDays(context, ascending: false, limit: 0) == ["nan", "100", "50"], label)
                // Limited: walked through the index on day.
                #expect(try Self.sortedDays(context, ascending: true, limit: 3) == ["50", "100", "nan"], label)
                #expect(try Self.sortedDays(context, ascending: false, limit: 1) == ["nan"], label)
                #expect(try Self.sortedDays(context, ascending: true, limit: 1) == ["50"], label)

                var request = FetchRequest(entityName: "Event")
                request.resultType = .dictionary
                request.propertiesToFetch = [.expression(name: "first", .min, keyPath: "day"), .expression(name: "last", .max, keyPath: "day")]
                let rows = try context.fetchDictionaries(request)
                #expect(rows.count == 1)
                let (first, last) = (Self.interval(rows.first?["first"]), Self.interval(rows.first?["last"]))
                #expect(first == 50, label)
                #expect(last?.isNaN == true, label)

                let team = try #require(try context.fetch(FetchRequest(entityName: "Team")).first)
                let (least, most) = (Self.interval(team.value(forKeyPath: "events.@min.day")), Self.interval(team.value(forKeyPath: "events.@max.day")))
                #expect(least == 50, label)
                #expect(most?.isNaN == true, label)
                let min = try FormatPredicate(format: "min(%@) == %@", argumentArray: [days, Date(timeIntervalSinceReferenceDate: 50)])
                #expect(try min.evaluate(with: nil), label)
                // A NaN date is still equal to nothing and in no range.
                var ranged = FetchRequest(entityName: "Event")
                ranged.predicate = try FormatPredicate(format: "day > %@", argumentArray: [Date(timeIntervalSinceReferenceDate: 60)])
                #expect(try context.fetch(ranged).count == 1, label)
            }
        }
    }

    @Test("a results controller whose sections are dates names a NaN date's section \"nan\", last (before, Date.description trapped on it and performFetch crashed the process)")
    func nanDateSection() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await Self.seedEvents(
            dir, [Date(timeIntervalSinceReferenceDate: 100), Self.nanDate, Date(timeIntervalSinceReferenceDate: 50)])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var request = FetchRequest(entityName: "Event")
            request.sortDescriptors = [FetchSortDescriptor(key: "day")]
            let controller = FetchedResultsController(fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: "day")
            try controller.performFetch()
            let names = controller.sections?.map(\.name) ?? []
            #expect(names.count == 3)
            #expect(names.first == Date(timeIntervalSinceReferenceDate: 50).description)
            #expect(names.last == "nan")
        }
    }

    @Test("a sort comparing a NaN date with a value of another kind (compared as text) gives an order, not a crash")
    func nanDateAgainstOtherKinds() {
        let order = FetchSortDescriptor.compareValues(Self.nanDate, "x", caseInsensitive: false)
        #expect(order == .orderedAscending, "\"nan\" < \"x\"")
        #expect(FetchSortDescriptor.compareValues("x", Self.nanDate, caseInsensitive: false) == .orderedDescending)
    }

    @Test("a NaN date set on an attribute of another type is kept as invalid, described as nan, and refused at save (1550), not a crash")
    func nanDateOnAnotherType() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try await Self.seedEvents(dir, [])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let event = try context.insertNewObject(forEntityName: "Event")
            event.setValue(Self.nanDate, forKey: "label")
            let kept = event.value(forKey: "label") as? String
            #expect(kept?.contains("nan") == true, "\(kept ?? "nil")")
            #expect(throws: (any Error).self) { try context.save() }
            event.setValue([Self.nanDate], forKey: "label")
            #expect((event.value(forKey: "label") as? String)?.contains("[nan]") == true)
        }
    }

    @Test("a NaN date in a uniqueness constraint leaves it unchecked, as a NaN double does: two objects holding one don't clash, in the store or the context")
    func nanDateUniqueness() async throws {
        let dir = try TemporaryDirectory()
        let model = try ManagedObjectModel {
            Entity("Booking") {
                Attribute("room", .string)
                Attribute("day", .date)
                Unique("room", "day")
            }
        }
        let coordinator = try openCoordinator(dir, model: model)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            for _ in 0..<2 {
                let booking = try context.insertNewObject(forEntityName: "Booking")
                booking.setValue("A", forKey: "room")
                booking.setValue(Self.nanDate, forKey: "day")
            }
            try context.save()
            let third = try context.insertNewObject(forEntityName: "Booking")
            third.setValue("A", forKey: "room")
            third.setValue(Date(timeIntervalSinceReferenceDate: -.nan), forKey: "day")
            try context.save()
            #expect(try context.count(for: FetchRequest(entityName: "Booking")) == 3)
            // A real date still clashes.
            for _ in 0..<2 {
                let booking = try context.insertNewObject(forEntityName: "Booking")
                booking.setValue("B", forKey: "room")
                booking.setValue(Date(timeIntervalSinceReferenceDate: 7), forKey: "day")
            }
            #expect(throws: (any Error).self) { try context.save() }
        }
        #expect(try coordinator.persistentStores[0].log.verify().isClean)
    }

    // MARK: - Grouping canonically equivalent strings

    static let precomposed = "caf\u{E9}"
    static let decomposed = "cafe\u{301}"

    @Test("grouping, distinct rows, == and a uniqueness constraint all take canonically equivalent strings (é precomposed or decomposed) as one value")
    func canonicalGrouping() async throws {
        #expect(Array(Self.precomposed.unicodeScalars) != Array(Self.decomposed.unicodeScalars))
        let dir = try TemporaryDirectory()
        let model = try ManagedObjectModel {
            Entity("Word") {
                Attribute("text", .string)
                Attribute("count", .int64)
            }
        }
        let coordinator = try openCoordinator(dir, model: model)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            for (text, count) in [(Self.precomposed, 1), (Self.decomposed, 2), ("cafe", 4)] {
                let word = try context.insertNewObject(forEntityName: "Word")
                word.setValue(text, forKey: "text")
                word.setValue(Int64(count), forKey: "count")
            }
            try context.save()
        }
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            var request = FetchRequest(entityName: "Word")
            request.resultType = .dictionary
            request.propertiesToGroupBy = ["text"]
            request.propertiesToFetch = ["text", .expression(name: "total", .sum, keyPath: "count")]
            request.sortDescriptors = [FetchSortDescriptor(key: "text")]
            let rows = try context.fetchDictionaries(request)
            #expect(rows.count == 2, "\(rows)")
            #expect(rows.map { $0["total"] as? Int64 } == [4, 3])
            // The group's key is its first member's form, as stored.
            #expect((rows.last?["text"] as? String).map { Array($0.unicodeScalars) } == Array(Self.precomposed.unicodeScalars))

            var distinct = FetchRequest(entityName: "Word")
            distinct.resultType = .dictionary
            distinct.propertiesToFetch = ["text"]
            distinct.returnsDistinctResults = true
            #expect(try context.fetchDictionaries(distinct).count == 2)

            for form in [Self.precomposed, Self.decomposed] {
                var equal = FetchRequest(entityName: "Word")
                equal.predicate = try FormatPredicate(format: "text == %@", argumentArray: [form])
                #expect(try context.fetch(equal).count == 2)
            }
        }

        let uniqueDir = try TemporaryDirectory()
        let unique = try openCoordinator(uniqueDir, model: try ManagedObjectModel {
            Entity("Word") {
                Attribute("text", .string)
                Unique("text")
            }
        })
        try await privateContext(unique).perform { (context: isolated ManagedObjectContext) throws in
            let word = try context.insertNewObject(forEntityName: "Word")
            word.setValue(Self.precomposed, forKey: "text")
            try context.save()
            let other = try context.insertNewObject(forEntityName: "Word")
            other.setValue(Self.decomposed, forKey: "text")
            #expect(throws: (any Error).self) { try context.save() }
        }
    }

    // MARK: - As-of reads before a paired side's fill

    static func playlistModel() throws -> ManagedObjectModel {
        try ManagedObjectModel {
            Entity("Playlist") {
                Attribute("name", .string)
                Relationship("songs", to: "Song", inverse: "playlists", toMany: true, ordered: true)
            }
            Entity("Song") {
                Attribute("name", .string)
                Relationship("playlists", to: "Playlist", inverse: "songs", toMany: true, ordered: true)
            }
        }
    }

    static func playlist(_ pk: UInt64) -> StoredObjectID { StoredObjectID(entity: "Playlist", primaryKey: pk) }
    static func song(_ pk: UInt64) -> StoredObjectID { StoredObjectID(entity: "Song", primaryKey: pk) }

    static func list(_ value: LogValue?) -> [StoredObjectID] {
        guard case .references(let ids)? = value else { return [] }
        return ids
    }

    @Test("as-of reads of a point before an old store's paired-side fill give that side's lists derived from the inverse's lists then, as the fill derives them")
    func asOfBeforeFill() async throws {
        let dir = try TemporaryDirectory()
        let model = try Self.playlistModel()
        let path = dir.url.appendingPathComponent("store").path
        // The old way (format 1): only Playlist.songs recorded, no code for Song.playlists.
        do {
            var configuration = EventLog.Configuration()
            configuration.skipsOrderedPairCheck = true
            let old = try EventLog(path: path, model: model, configuration: configuration)
            var draft = TransactionDraft()
            let p1 = draft.insert("Playlist", values: ["name": .attribute(.string("p1"))])
            let p2 = draft.insert("Playlist", values: ["name": .attribute(.string("p2"))])
            let s1 = draft.insert("Song", values: ["name": .attribute(.string("s1"))])
            let s2 = draft.insert("Song", values: ["name": .attribute(.string("s2"))])
            draft.update(p2, values: ["songs": .references([s1])])
            draft.update(p1, values: ["songs": .references([s2, s1])])
            _ = try old.commit(draft)
            // Event 2: p2 lets s1 go.
            var second = TransactionDraft()
            second.update(.stored(Self.playlist(2)), values: ["songs": .references([])])
            _ = try old.commit(second)
            try old.environment.write { txn in
                let name = Array("rSong.playlists".utf8)
                let code = try #require(try txn.value(forKey: name, in: old.tables.catalog))
                _ = try txn.delete(key: name, in: old.tables.catalog)
                _ = try txn.delete(key: [UInt8(ascii: "R")] + code, in: old.tables.catalog)
            }
        }
        // The fill (event 3), then a move on the filled side (event 4).
        let coordinator = try openCoordinator(dir, model: model)
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            let p2 = try #require(try context.fetch(FetchRequest(entityName: "Playlist")).first { $0.value(forKey: "name") as? String == "p2" })
            let s1 = try #require(try context.fetch(FetchRequest(entityName: "Song")).first { $0.value(forKey: "name") as? String == "s1" })
            s1.mutableOrderedSetValue(forKey: "playlists").insert(p2, at: 0)
            try context.save()
        }
        let log = coordinator.persistentStores[0].log
        #expect(try log.head == 4)
        #expect(try log.read { try $0.event(3) }.kind == .migration)

        let (s1, s2, p1, p2) = (Self.song(1), Self.song(2), Self.playlist(1), Self.playlist(2))
        let expected: [UInt64: [StoredObjectID: [StoredObjectID]]] = [
            1: [s1: [p1, p2], s2: [p1]],
            2: [s1: [p1], s2: [p1]],
            3: [s1: [p1], s2: [p1]],
            4: [s1: [p2, p1], s2: [p1]],
        ]
        for (sequence, lists) in expected.sorted(by: { $0.key < $1.key }) {
            try log.read { reader in
                let state = try reader.state(asOf: sequence)
                let some = try reader.objects([s1, s2, p1], asOf: sequence)
                for (song, playlists) in lists {
                    #expect(Self.list(state.objects[song]?["playlists"]) == playlists, "state as of \(sequence), \(song)")
                    #expect(Self.list(some[song]?["playlists"]) == playlists, "objects as of \(sequence), \(song)")
                    #expect(Self.list(try reader.object(song, asOf: sequence)?["playlists"]) == playlists, "object as of \(sequence), \(song)")
                }
                // The other side is as it was recorded.
                #expect(Self.list(some[p1]?["songs"]) == [s2, s1])
                #expect(Self.list(state.objects[p1]?["songs"]) == [s2, s1])
            }
        }
        // A context pinned to each point (a query generation, which undoes no migration)
        // reads the same lists, by name.
        let names: [UInt64: [String: [String]]] = [
            1: ["s1": ["p1", "p2"], "s2": ["p1"]],
            2: ["s1": ["p1"], "s2": ["p1"]],
            3: ["s1": ["p1"], "s2": ["p1"]],
            4: ["s1": ["p2", "p1"], "s2": ["p1"]],
        ]
        let store = try #require(coordinator.persistentStores.first)
        for (sequence, lists) in names.sorted(by: { $0.key < $1.key }) {
            let read = try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws -> [String: [String]] in
                try context.setQueryGenerationFrom(QueryGenerationToken(storeIdentifier: store.identifier, sequence: sequence))
                var result: [String: [String]] = [:]
                for song in try context.fetch(FetchRequest(entityName: "Song")) {
                    let playlists = (song.value(forKey: "playlists") as? [ManagedObject]) ?? []
                    result[song.value(forKey: "name") as? String ?? "?"] = playlists.map { $0.value(forKey: "name") as? String ?? "?" }
                }
                return result
            }
            #expect(read == lists, "pinned to \(sequence)")
        }
        // A tool's open (the store's own newest model) reads the same.
        let tool = try EventLog(openingExistingAt: path)
        #expect(try tool.read { Self.list(try $0.object(s1, asOf: 1)?["playlists"]) } == [p1, p2])
        #expect(try tool.read { Self.list(try $0.state(asOf: 2).objects[s1]?["playlists"]) } == [p1])
    }
}
