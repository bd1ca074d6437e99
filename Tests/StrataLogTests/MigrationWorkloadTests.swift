import Foundation
import StrataLog
import StrataModel
import StrataStorage
import StrataTestSupport
import Testing

/// `libraryModel()`'s next version, changed every way spec 0004 §4.4–4.5 migrates:
/// Member.email renamed to contact (indexed, unique), Member.age widened to int64,
/// Member.rating removed, Member.level added (mandatory, default 1), Member.favourites renamed
/// to liked (no inverse), Club.lineup made unordered (so Member.lineupClub becomes the recorded
/// side), Club.sponsors renamed to backers (the recorded side of a many-to-many), Badge.club
/// renamed to owner (the recorded side of a one-to-one), and the entity Sponsor renamed to
/// Backer (every reference to a sponsor moves with it).
func evolvedLibraryModel() throws -> ManagedObjectModel {
    try ManagedObjectModel {
        Entity("Club") {
            Attribute("name", .string)
            Attribute("founded", .date)
            Relationship("members", to: "Member", inverse: "club", toMany: true)
            Relationship("lineup", to: "Member", inverse: "lineupClub", toMany: true)
            Relationship("backers", to: "Backer", inverse: "clubs", toMany: true).renamed(from: "sponsors")
            Relationship("badge", to: "Badge", inverse: "owner")
        }
        Entity("Member") {
            Attribute("name", .string)
            Attribute("contact", .string).indexed().renamed(from: "email")
            Attribute("age", .int64).indexed()
            Attribute("level", .int16, default: 1).required()
            Attribute("notes", .string, transient: true)
            Relationship("club", to: "Club", inverse: "members")
            Relationship("lineupClub", to: "Club", inverse: "lineup")
            Relationship("liked", to: "Backer", toMany: true).renamed(from: "favourites")
            Unique("contact")
        }
        Entity("Captain", parent: "Member") {
            Attribute("since", .date)
        }
        Entity("Backer") {
            Attribute("name", .string)
            Relationship("clubs", to: "Club", inverse: "backers", toMany: true)
        }.renamed(from: "Sponsor")
        Entity("Badge") {
            Attribute("colour", .string)
            Relationship("owner", to: "Club", inverse: "badge").renamed(from: "club")
        }
    }
}

/// A random store of `libraryModel()` opened with `evolvedLibraryModel()`: the state after the
/// migration is the state before with every change applied by hand, and verify, replay,
/// as-of, indexes and compaction agree (spec 0004 §4.4–4.5).
@Suite("Event log: a random store migrated to a model changed every way")
struct MigrationWorkloadTests {
    static let transactions = max(environmentNumber("STRATA_MIGRATION_TRANSACTIONS", default: 400), 20)

    /// `state`, changed as the evolved model's migration changes it.
    static func expected(from state: StateImage) -> StateImage {
        var result = state
        for (id, values) in state.objects {
            var changed = values
            switch id.entity {
            case "Member", "Captain":
                changed["contact"] = changed.removeValue(forKey: "email")
                changed["liked"] = changed.removeValue(forKey: "favourites")
                changed["rating"] = nil
                if case .attribute(.int32(let age))? = changed["age"] { changed["age"] = .attribute(.int64(Int64(age))) }
                changed["level"] = .attribute(.int16(1))
            case "Club":
                // Backer.clubs sorts before Club.backers: the many-to-many is recorded on the
                // backers now (spec 0004 §4.1, rule 4).
                changed["sponsors"] = nil
                if case .references(let sponsors)? = values["sponsors"] {
                    for sponsor in sponsors {
                        var clubs: [StoredObjectID] = []
                        if case .references(let held)? = result.objects[sponsor]?["clubs"] { clubs = held }
                        result.objects[sponsor]?["clubs"] = .references((clubs + [id]).sorted())
                    }
                }
                changed["lineup"] = nil
                if case .references(let lineup)? = values["lineup"] {
                    for member in lineup { result.objects[member]?["lineupClub"] = .reference(id) }
                }
            case "Badge":
                changed["owner"] = changed.removeValue(forKey: "club")
            default: break
            }
            // Set the changed values, keeping what other objects put in already.
            let kept = (result.objects[id] ?? [:]).filter { $0.key == "lineupClub" || $0.key == "clubs" }
            result.objects[id] = changed.filter { $0.value != .null }.merging(kept) { _, other in other }
        }
        // Sponsors are Backers now, under the same primary keys, and so is every reference.
        func moved(_ id: StoredObjectID) -> StoredObjectID {
            id.entity == "Sponsor" ? StoredObjectID(entity: "Backer", primaryKey: id.primaryKey) : id
        }
        var image = StateImage()
        for (id, values) in result.objects {
            image.objects[moved(id)] = values.mapValues { value in
                switch value {
                case .reference(let target): .reference(moved(target))
                case .references(let targets): .references(targets.map(moved))
                default: value
                }
            }
        }
        return image
    }

    @Test("a random store migrated to the evolved model: state == the old state changed by hand; verify, replay, as-of before, indexes and compaction agree")
    func randomStoreMigrated() throws {
        let dir = try TemporaryDirectory("strata-migration-workload")
        do {
            let workload = LibraryWorkload(log: try openLog(dir, model: try libraryModel()) { $0.checkpointInterval = 100 }, seed: 0x4D49_4752)
            try workload.run(transactions: Self.transactions)
        }
        let (before, oldHead) = try { () throws -> (StateImage, UInt64) in
            let log = try openLog(dir, model: try libraryModel())
            return (try log.read { try $0.currentState() }, try log.head)
        }()
        let lineups = before.objects.filter { $0.key.entity == "Club" && $0.value["lineup"] != nil }.count
        let favourites = before.objects.values.filter { $0["favourites"] != nil }.count
        #expect(lineups > 0 && favourites > 0, "the workload made lineups (\(lineups)) and favourites (\(favourites))")

        let log = try openLog(dir, model: try evolvedLibraryModel()) { $0.checkpointInterval = 100 }
        let head = try log.head
        // Renamed, removed and re-sided values out (the references to sponsors among them:
        // Club.sponsors and Member.favourites are both retired), sponsors out, the put-back.
        #expect(head == oldHead + 3, "\(head - oldHead) migration transactions")
        let after = try log.read { try $0.currentState() }
        let expected = Self.expected(from: before)
        #expect(after == expected, "\(stateDifferences(after.objects, expected.objects))")

        try log.read { reader in
            #expect(try reader.state(asOf: oldHead) == before, "as of the last transaction before the migration")
            var contacts = 0
            try reader.scanIndex(entity: "Member", attribute: "contact", range: .all) { id in
                if expected.objects[id]?["contact"] != nil { contacts += 1 }
                return .next
            }
            #expect(contacts == expected.objects.values.filter { $0["contact"] != nil }.count, "the renamed attribute's index")
            for (id, values) in expected.objects where id.entity == "Member" || id.entity == "Captain" {
                if case .reference(let club)? = values["lineupClub"] {
                    #expect(try reader.related(club, "lineup").contains(id), "\(club).lineup, derived now, holds \(id)")
                }
            }
        }
        var replayed = StateImage()
        try log.read { reader in
            try reader.forEachEvent { event in
                replayed.apply(event)
                return .next
            }
        }
        #expect(replayed == after, "the events replayed")
        let report = try log.verify()
        #expect(report.isClean, "\(report.problems.prefix(5))")
        try log.compact(CompactionRequest())
        #expect(try log.read { try $0.state(asOf: oldHead) } == before, "after compaction")
        #expect(try log.verify().isClean)
    }

    @Test("a random store migrated to the evolved model, read through views pinned to generations before the migration: each is the state as of then changed by hand — renamed, retyped and removed properties, an added attribute's default, a renamed entity, and relationships whose recorded side the migration moved (spec 0006 §22.4)")
    func generationsBeforeTheMigration() throws {
        let dir = try TemporaryDirectory("strata-migration-generations")
        do {
            let workload = LibraryWorkload(log: try openLog(dir, model: try libraryModel()) { $0.checkpointInterval = 100 }, seed: 0x4745_4E53)
            try workload.run(transactions: Self.transactions)
        }
        let oldHead = try openLog(dir, model: try libraryModel()).head
        let log = try openLog(dir, model: try evolvedLibraryModel()) { $0.checkpointInterval = 100 }
        #expect(try log.head > oldHead)
        var points = Set(stride(from: UInt64(0), through: oldHead, by: Int(max(oldHead / 8, 1))))
        points.insert(oldHead)
        for point in points.sorted() {
            let expected = Self.expected(from: try log.read { try $0.state(asOf: point) })
            var read = StateImage()
            try log.read(pinnedTo: GenerationView(sequence: point)) { (reader: borrowing LogReader) throws in
                for entity in ["Club", "Member", "Captain", "Backer", "Badge"] {
                    try reader.forEachObject(of: entity, includingSubentities: false) { object in
                        read.objects[object.id] = object.values.filter { $0.value != .null }
                        return .next
                    }
                }
            }
            // Compared as the differences' text: the states themselves are too large to print.
            #expect(stateDifferences(read.objects, expected.objects) == "no differences", "as of \(point)")
        }
    }
}
