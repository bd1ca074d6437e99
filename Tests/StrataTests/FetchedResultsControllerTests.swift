import Foundation
@testable import Strata
import StrataTestSupport
import Testing

// MARK: - A delegate that checks what it hears

/// One batch as a delegate heard it.
struct HeardBatch {
    var sections: [(type: FetchedResultsChangeType, index: Int, name: String)] = []
    var objects: [(object: ManagedObject, type: FetchedResultsChangeType, old: IndexPath?, new: IndexPath?, label: String)] = []

    /// The object changes as `type old>new label`, for readable expectations (the label is
    /// the object's name when the delegate heard of it, `?` for an object no longer in its
    /// context).
    func lines() -> [String] {
        objects.map { change in
            func text(_ path: IndexPath?) -> String { path.map { "\($0[0]).\($0[1])" } ?? "-" }
            return "\(change.type) \(text(change.old))>\(text(change.new)) \(change.label)"
        }
    }
}

typealias ShownTable = [(name: String, objects: [ManagedObject])]

/// Applies a batch to the table shown before it as UIKit's batch updates do: deletes and
/// moves leave by their old index paths, deleted sections go, inserted sections come,
/// inserts and moves arrive at their new index paths in ascending order, updates replace
/// the object at the new index path. Throws when the batch doesn't fit the table.
func applying(_ batch: HeardBatch, to old: ShownTable) throws -> ShownTable {
    struct Misfit: Error, CustomStringConvertible { let description: String }
    var rows = old.map { (name: $0.name, objects: $0.objects.map(Optional.some)) }
    func at(_ path: IndexPath?) throws -> ManagedObject {
        guard let path, path.count == 2, rows.indices.contains(path[0]), rows[path[0]].objects.indices.contains(path[1]),
            let object = rows[path[0]].objects[path[1]]
        else { throw Misfit(description: "no object at old index path \(String(describing: path))") }
        return object
    }
    for change in batch.objects where change.type != .insert {
        let present = try at(change.old)
        guard present === change.object || present.objectID == change.object.objectID else {
            throw Misfit(description: "\(change.type) names \(change.object.objectID) at \(change.old!) but \(present.objectID) is there")
        }
        if change.type != .update { rows[change.old![0]].objects[change.old![1]] = nil }
    }
    var table: ShownTable = rows.map { ($0.name, $0.objects.compactMap { $0 }) }
    for deleted in batch.sections.filter({ $0.type == .delete }).sorted(by: { $0.index > $1.index }) {
        guard table.indices.contains(deleted.index), table[deleted.index].objects.isEmpty, table[deleted.index].name == deleted.name else {
            throw Misfit(description: "section \(deleted.index) \"\(deleted.name)\" deleted but not empty or not there")
        }
        table.remove(at: deleted.index)
    }
    for inserted in batch.sections.filter({ $0.type == .insert }).sorted(by: { $0.index < $1.index }) {
        guard inserted.index <= table.count else { throw Misfit(description: "section inserted at \(inserted.index) beyond \(table.count)") }
        table.insert((inserted.name, []), at: inserted.index)
    }
    for arrival in batch.objects.filter({ $0.type == .insert || $0.type == .move }).sorted(by: { $0.new! < $1.new! }) {
        guard let path = arrival.new, table.indices.contains(path[0]), path[1] <= table[path[0]].objects.count else {
            throw Misfit(description: "\(arrival.type) to \(String(describing: arrival.new)) is outside the table")
        }
        table[path[0]].objects.insert(arrival.object, at: path[1])
    }
    for update in batch.objects where update.type == .update {
        guard let path = update.new, table.indices.contains(path[0]), table[path[0]].objects.indices.contains(path[1]),
            table[path[0]].objects[path[1]].objectID == update.object.objectID
        else { throw Misfit(description: "update of \(update.object.objectID) doesn't land on it at \(String(describing: update.new))") }
        table[path[0]].objects[path[1]] = update.object
    }
    return table
}

/// The table a controller shows.
func shown(_ controller: AnyFetchedResultsController) -> ShownTable {
    (controller.sections ?? []).map { ($0.name, $0.objects) }
}

/// Whether two tables hold the same sections and the same object instances.
func same(_ a: ShownTable, _ b: ShownTable) -> Bool {
    a.count == b.count
        && zip(a, b).allSatisfy { x, y in
            x.name == y.name && x.objects.count == y.objects.count && zip(x.objects, y.objects).allSatisfy { $0 === $1 }
        }
}

/// Where two tables differ first, briefly.
func firstDifference(_ a: ShownTable, _ b: ShownTable) -> String {
    func label(_ object: ManagedObject) -> String {
        object.isInvalidated ? "<invalidated \(object.objectID)>" : "\(object.value(forKey: "name") as? String ?? "nil")"
    }
    for index in 0..<max(a.count, b.count) {
        guard index < a.count, index < b.count else { return "section \(index) only in one: \(a.count) vs \(b.count) sections" }
        if a[index].name != b[index].name { return "section \(index): \"\(a[index].name)\" vs \"\(b[index].name)\"" }
        let x = a[index].objects, y = b[index].objects
        for row in 0..<max(x.count, y.count) {
            guard row < x.count, row < y.count else { return "section \(index) \"\(a[index].name)\": \(x.count) vs \(y.count) objects" }
            if x[row] !== y[row] {
                let whereSecond = a.enumerated().compactMap { section in
                    section.element.objects.firstIndex { $0.objectID == y[row].objectID }.map { "\(section.offset).\($0)" }
                }
                return "section \(index) \"\(a[index].name)\" row \(row): \(label(x[row])) vs \(label(y[row])) "
                    + "(\(x[row].objectID) vs \(y[row].objectID)); the second is at \(whereSecond) in the first"
            }
        }
    }
    return "no difference"
}

func describe(_ table: ShownTable, _ key: String = "name") -> String {
    table.map { section in "[\(section.name): " + section.objects.map { ($0.value(forKey: key) as? String) ?? "?" }.joined(separator: ", ") + "]" }
        .joined(separator: " ")
}

/// Records every batch, and keeps its own copy of the table by applying each batch to the
/// one before — after every batch that copy must be exactly what the controller shows.
final class RecordingDelegate: FetchedResultsControllerDelegate {
    var batches: [HeardBatch] = []
    var current: HeardBatch?
    var mirror: ShownTable
    var problems: [String] = []
    var titles: [String: String] = [:]
    /// The property that labels objects in ``HeardBatch/lines()``.
    let labelKey: String

    init(mirroring controller: AnyFetchedResultsController, label: String = "name") {
        mirror = shown(controller)
        labelKey = label
    }

    var last: HeardBatch? { batches.last }

    func controllerWillChangeContent(_ controller: AnyFetchedResultsController) {
        if current != nil { problems.append("willChange inside a batch") }
        current = HeardBatch()
    }

    func controller(
        _ controller: AnyFetchedResultsController, didChange anObject: ManagedObject, at indexPath: IndexPath?,
        for type: FetchedResultsChangeType, newIndexPath: IndexPath?
    ) {
        guard current != nil else { return problems.append("object change outside a batch") }
        let label = anObject.isInvalidated ? "?" : (anObject.value(forKey: labelKey) as? String ?? "nil")
        current?.objects.append((anObject, type, indexPath, newIndexPath, label))
    }

    func controller(
        _ controller: AnyFetchedResultsController, didChange sectionInfo: FetchedResultsSectionInfo, atSectionIndex sectionIndex: Int,
        for type: FetchedResultsChangeType
    ) {
        guard current != nil else { return problems.append("section change outside a batch") }
        current?.sections.append((type, sectionIndex, sectionInfo.name))
    }

    func controllerDidChangeContent(_ controller: AnyFetchedResultsController) {
        guard let batch = current else { return problems.append("didChange without willChange") }
        current = nil
        batches.append(batch)
        do {
            mirror = try applying(batch, to: mirror)
            if !same(mirror, shown(controller)) {
                problems.append("applying the batch gives \(describe(mirror)) but the controller shows \(describe(shown(controller)))")
                mirror = shown(controller)
            }
        } catch {
            problems.append("batch \(batch.lines()) doesn't apply: \(error)")
            mirror = shown(controller)
        }
    }

    func controller(_ controller: AnyFetchedResultsController, sectionIndexTitleForSectionName sectionName: String) -> String? {
        titles[sectionName] ?? controller.sectionIndexTitle(forSectionName: sectionName)
    }
}

/// A delegate of the difference form: keeps the IDs shown, applying each difference.
final class DifferenceDelegate: FetchedResultsControllerDelegate {
    var ids: [ManagedObjectID]
    var differences: [CollectionDifference<ManagedObjectID>] = []
    var otherCalls = 0
    var problems: [String] = []

    init(mirroring controller: AnyFetchedResultsController) {
        ids = (controller.sections ?? []).flatMap(\.objects).map(\.objectID)
    }

    func controller(_ controller: AnyFetchedResultsController, didChangeContentWith difference: CollectionDifference<ManagedObjectID>) {
        differences.append(difference)
        guard let next = ids.applying(difference) else { return problems.append("the difference doesn't apply to \(ids)") }
        ids = next
        let now = (controller.sections ?? []).flatMap(\.objects).map(\.objectID)
        if ids != now { problems.append("applying the difference gives \(ids) but the controller shows \(now)") }
    }

    func controllerWillChangeContent(_ controller: AnyFetchedResultsController) { otherCalls += 1 }
    func controllerDidChangeContent(_ controller: AnyFetchedResultsController) { otherCalls += 1 }
    func controller(
        _ controller: AnyFetchedResultsController, didChange anObject: ManagedObject, at indexPath: IndexPath?,
        for type: FetchedResultsChangeType, newIndexPath: IndexPath?
    ) { otherCalls += 1 }
}

/// Seed 004's team as a class of its own.
final class LeagueTeam: ManagedObject {
    var name: String? { self.get("name") }
}

/// A private context on a new League Manager store in `dir`.
func leagueContext(_ dir: TemporaryDirectory) throws -> ManagedObjectContext {
    privateContext(try openCoordinator(dir, model: try SeedModels.leagueManager))
}

func names(_ objects: [ManagedObject]?, _ key: String = "name") -> [String] {
    (objects ?? []).map { $0.value(forKey: key) as? String ?? "nil" }
}

/// Teams sorted by name, ascending unless told.
/// A controller of the teams by name, fetched, with a recording delegate set.
func followedTeams(_ context: isolated ManagedObjectContext) throws -> (FetchedResultsController<ManagedObject>, RecordingDelegate) {
    let teams = FetchedResultsController(fetchRequest: teamRequest(), managedObjectContext: context)
    try teams.performFetch()
    let delegate = RecordingDelegate(mirroring: teams)
    teams.delegate = delegate
    return (teams, delegate)
}

func teamRequest(ascending: Bool = true) -> FetchRequest<ManagedObject> {
    FetchRequest(entityName: "Team", sortDescriptors: [FetchSortDescriptor(key: "name", ascending: ascending)])
}

@discardableResult
func team(_ context: isolated ManagedObjectContext, _ name: String, color: String? = nil) throws -> ManagedObject {
    let team = try context.insertNewObject(forEntityName: "Team")
    team.setValue(name, forKey: "name")
    if let color { team.setValue(color, forKey: "uniformColor") }
    return team
}

@discardableResult
func player(_ context: isolated ManagedObjectContext, _ last: String, of team: ManagedObject?) throws -> ManagedObject {
    let player = try context.insertNewObject(forEntityName: "Player")
    player.setValue(last, forKey: "lastName")
    player.setValue(team, forKey: "team")
    return player
}

// MARK: - Tests

@Suite("Fetched results controllers: sections, rows and a delegate that follows the context")
struct FetchedResultsControllerTests {
    @Test("seed 004 League Manager: the team list through the controller; insert via fetchRequest and its context; cascade; reopen")
    func leagueManager() async throws {
        let dir = try TemporaryDirectory()
        let model = try SeedModels.leagueManager
        let context = privateContext(try openCoordinator(dir, model: model))
        try await context.perform { (context: isolated ManagedObjectContext) throws in
            for (name, color) in [("Crew", "Blue"), ("Fire", "Red"), ("Revolution", "Green")] {
                let crew = try team(context, name, color: color)
                if name == "Crew" { for last in ["Gordon", "Sprat", "Staley"] { try player(context, last, of: crew) } }
            }
            try context.save()

            // The seed's controller: Team, sorted by name with ascending:NO.
            let teams = FetchedResultsController(fetchRequest: teamRequest(ascending: false), managedObjectContext: context)
            #expect(teams.fetchedObjects == nil, "nil before performFetch")
            #expect(teams.sections == nil)
            try teams.performFetch()
            let list = RecordingDelegate(mirroring: teams)
            teams.delegate = list
            #expect(names(teams.fetchedObjects) == ["Revolution", "Fire", "Crew"])
            #expect(teams.sections?.count == 1 && teams.sections?[0].numberOfObjects == 3)
            // configureCell:atIndexPath: — objectAtIndexPath, then name and colour.
            let cell = teams.object(at: IndexPath(row: 1, section: 0))
            #expect(cell.value(forKey: "name") as? String == "Fire" && cell.value(forKey: "uniformColor") as? String == "Red")

            // insertTeamWithName:uniformColor: takes the context and the entity from the controller.
            #expect(teams.managedObjectContext === context)
            let entityName = teams.fetchRequest.entityName
            try teams.managedObjectContext.performAndWait { context in
                let newTeam = try context.insertNewObject(forEntityName: entityName)
                newTeam.setValue("Galaxy", forKey: "name")
                newTeam.setValue("White", forKey: "uniformColor")
                try context.save()  // saveContext
            }
            #expect(list.batches.count == 1, "the save's changes come as one batch")
            #expect(list.last?.lines() == ["insert ->0.1 Galaxy"])
            #expect(names(teams.fetchedObjects) == ["Revolution", "Galaxy", "Fire", "Crew"])
            let galaxy = teams.object(at: IndexPath(row: 1, section: 0))
            #expect(teams.indexPath(forObject: galaxy) == IndexPath(row: 1, section: 0))
            #expect(!galaxy.objectID.isTemporaryID, "saved")

            // Deleting Crew (commitEditingStyle) cascades to its players.
            let crew = teams.object(at: IndexPath(row: 3, section: 0))
            context.delete(crew)
            try context.save()
            #expect(list.last?.lines() == ["delete 0.3>- Crew"])
            #expect(try context.count(for: FetchRequest(entityName: "Player")) == 0, "the players went with their team")
            #expect(names(teams.fetchedObjects) == ["Revolution", "Galaxy", "Fire"])
            #expect(teams.indexPath(forObject: crew) == nil)
            #expect(list.problems.isEmpty, "\(list.problems)")
        }
        // Reopen the store: a new controller fetches the same list.
        let reopened = privateContext(try openCoordinator(dir, model: model))
        let again = try await reopened.perform { (context: isolated ManagedObjectContext) throws in
            let teams = FetchedResultsController(fetchRequest: teamRequest(ascending: false), managedObjectContext: context)
            try teams.performFetch()
            return names(teams.fetchedObjects)
        }
        #expect(again == ["Revolution", "Galaxy", "Fire"])
    }

    @Test("a custom class, by type annotation or as:; objects of other classes are left out; index paths, titles and caches")
    func typedResultsAndAccessors() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager, classes: [(LeagueTeam.self, "Team")])
        try await privateContext(coordinator).perform { (context: isolated ManagedObjectContext) throws in
            for name in ["apple", "Avocado", "banana"] { try team(context, name) }
            try context.save()
            let typed = FetchedResultsController<LeagueTeam>(fetchRequest: teamRequest(), managedObjectContext: context, cacheName: "Teams")
            try typed.performFetch()
            #expect(typed.fetchedObjects?.map(\.name) == ["Avocado", "apple", "banana"], "strings sort by scalar values")
            #expect(typed.object(at: IndexPath(row: 2, section: 0)).name == "banana")
            #expect(typed.cacheName == "Teams")
            FetchedResultsController<LeagueTeam>.deleteCache(withName: "Teams")
            AnyFetchedResultsController.deleteCache(withName: nil)
            let viaAs = FetchedResultsController(fetchRequest: teamRequest(), managedObjectContext: context, as: LeagueTeam.self)
            try viaAs.performFetch()
            #expect(viaAs.fetchedObjects?.count == 3)
            // Players are plain ManagedObjects: a LeagueTeam controller of players shows none.
            let players = FetchedResultsController<LeagueTeam>(
                fetchRequest: FetchRequest(entityName: "Player", sortDescriptors: [FetchSortDescriptor(key: "lastName")]),
                managedObjectContext: context)
            try player(context, "Ng", of: nil)
            try players.performFetch()
            #expect(players.fetchedObjects?.isEmpty == true)

            // Sections and index titles, case-insensitive so both A's share a section order.
            var request = teamRequest()
            request.sortDescriptors = [FetchSortDescriptor(key: "name", caseInsensitive: true)]
            let sectioned = FetchedResultsController(fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: "name")
            try sectioned.performFetch()
            #expect(sectioned.sections?.map(\.name) == ["apple", "Avocado", "banana"])
            #expect(sectioned.sections?.map(\.indexTitle) == ["A", "A", "B"])
            #expect(sectioned.sectionIndexTitles == ["A", "B"])
            #expect(sectioned.section(forSectionIndexTitle: "B", at: 1) == 2)
            #expect(sectioned.section(forSectionIndexTitle: "Z", at: 9) == 2, "an unknown title stays within the sections")
            #expect(sectioned.sectionIndexTitle(forSectionName: "ölkj") == "Ö")
            #expect(sectioned.sectionIndexTitle(forSectionName: "") == nil)
            let delegate = RecordingDelegate(mirroring: sectioned)
            delegate.titles = ["banana": "🍌"]
            sectioned.delegate = delegate
            #expect(sectioned.sectionIndexTitles == ["A", "🍌"], "the delegate's titles")

            #expect(sectioned.object(ifValidAt: IndexPath(row: 0, section: 3)) == nil)
            #expect(sectioned.object(ifValidAt: IndexPath(row: 1, section: 0)) == nil)
            #expect(sectioned.object(ifValidAt: IndexPath(indexes: [0])) == nil)
            #expect(sectioned.object(ifValidAt: IndexPath(row: 0, section: 1))?.value(forKey: "name") as? String == "Avocado")
            let unshown = try team(context, "zzz")
            #expect(sectioned.indexPath(forObject: unshown) == nil, "not shown before the change is processed")
            context.processPendingChanges()
            #expect(sectioned.indexPath(forObject: unshown) == IndexPath(row: 0, section: 3))
        }
    }

    @Test("sections by an attribute: objects move between sections; sections appear and empty ones go")
    func sectionsByAttribute() async throws {
        let dir = try TemporaryDirectory()
        try await leagueContext(dir).perform { (context: isolated ManagedObjectContext) throws in
            for (name, color) in [("Ants", "Blue"), ("Bees", "Blue"), ("Cats", "Red")] { try team(context, name, color: color) }
            try context.save()
            var request = teamRequest()
            request.sortDescriptors = [FetchSortDescriptor(key: "uniformColor"), FetchSortDescriptor(key: "name")]
            let teams = FetchedResultsController(fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: "uniformColor")
            try teams.performFetch()
            let delegate = RecordingDelegate(mirroring: teams)
            teams.delegate = delegate
            #expect(teams.sections?.map(\.name) == ["Blue", "Red"])

            // A new colour: a section is inserted with its object.
            let dogs = try team(context, "Dogs", color: "Green")
            context.processPendingChanges()
            #expect(delegate.last?.sections.map { "\($0.type) \($0.index) \($0.name)" } == ["insert 1 Green"])
            #expect(delegate.last?.lines() == ["insert ->1.0 Dogs"])
            #expect(teams.sections?.map(\.name) == ["Blue", "Green", "Red"])

            // Cats turns Blue: Red empties and goes; Cats moves into Blue.
            let cats = try #require(teams.sections?[2].objects.first)
            cats.setValue("Blue", forKey: "uniformColor")
            context.processPendingChanges()
            #expect(delegate.last?.sections.map { "\($0.type) \($0.index) \($0.name)" } == ["delete 2 Red"])
            #expect(delegate.last?.lines() == ["move 2.0>0.2 Cats"])
            #expect(teams.sections?.map(\.name) == ["Blue", "Green"])
            #expect(names(teams.sections?[0].objects) == ["Ants", "Bees", "Cats"])

            // A nil colour is the section "" (nil sorts first).
            dogs.setValue(nil, forKey: "uniformColor")
            context.processPendingChanges()
            #expect(teams.sections?.map(\.name) == ["", "Blue"])
            #expect(delegate.last?.sections.map { "\($0.type) \($0.index) \($0.name)" } == ["delete 1 Green", "insert 0 "])
            #expect(delegate.problems.isEmpty, "\(delegate.problems)")
        }
    }

    @Test("sections through a to-one (team.name): renaming the team moves its players to another section; moving a player between teams")
    func sectionsThroughToOne() async throws {
        let dir = try TemporaryDirectory()
        try await leagueContext(dir).perform { (context: isolated ManagedObjectContext) throws in
            let crew = try team(context, "Crew")
            let fire = try team(context, "Fire")
            for last in ["Gordon", "Sprat"] { try player(context, last, of: crew) }
            try player(context, "Gary", of: fire)
            try context.save()
            let request = FetchRequest(
                entityName: "Player", sortDescriptors: [FetchSortDescriptor(key: "team.name"), FetchSortDescriptor(key: "lastName")])
            let players = FetchedResultsController(fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: "team.name")
            try players.performFetch()
            let delegate = RecordingDelegate(mirroring: players, label: "lastName")
            players.delegate = delegate
            #expect(players.sections?.map(\.name) == ["Crew", "Fire"])

            // A change to the related team alone: its players change section.
            crew.setValue("Zebras", forKey: "name")
            context.processPendingChanges()
            #expect(players.sections?.map(\.name) == ["Fire", "Zebras"])
            #expect(delegate.last?.sections.map { "\($0.type) \($0.index) \($0.name)" } == ["delete 0 Crew", "insert 1 Zebras"])
            #expect(delegate.last?.lines() == ["move 0.0>1.0 Gordon", "move 0.1>1.1 Sprat"])

            // A player changes team: the player itself changed.
            let gary = players.object(at: IndexPath(row: 0, section: 0))
            gary.setValue(crew, forKey: "team")
            context.processPendingChanges()
            #expect(players.sections?.map(\.name) == ["Zebras"])
            #expect(names(players.fetchedObjects, "lastName") == ["Gary", "Gordon", "Sprat"])
            #expect(delegate.last?.lines() == ["move 0.0>0.0 Gary"])

            // A rename that keeps every player where it is: updates.
            crew.setValue("Zulus", forKey: "name")
            context.processPendingChanges()
            #expect(delegate.last?.sections.map { "\($0.type) \($0.index) \($0.name)" } == ["delete 0 Zebras", "insert 0 Zulus"])
            #expect(delegate.problems.isEmpty, "\(delegate.problems)")
            try context.save()
        }
    }

    @Test("a sort key change is a move with old and new index paths; one that keeps the order is an update")
    func movesAndUpdates() async throws {
        let dir = try TemporaryDirectory()
        try await leagueContext(dir).perform { (context: isolated ManagedObjectContext) throws in
            for name in ["A", "C", "E", "G"] { try team(context, name) }
            try context.save()
            let (teams, delegate) = try followedTeams(context)

            teams.object(at: IndexPath(row: 0, section: 0)).setValue("F", forKey: "name")
            context.processPendingChanges()
            #expect(delegate.last?.lines() == ["move 0.0>0.2 F"])
            #expect(names(teams.fetchedObjects) == ["C", "E", "F", "G"])

            teams.object(at: IndexPath(row: 1, section: 0)).setValue("D", forKey: "name")
            teams.object(at: IndexPath(row: 3, section: 0)).setValue("red", forKey: "uniformColor")
            context.processPendingChanges()
            #expect(delegate.last?.lines() == ["update 0.1>0.1 D", "update 0.3>0.3 G"], "values changed, places didn't")

            // Two swap places in one batch: both move past the others.
            teams.object(at: IndexPath(row: 0, section: 0)).setValue("Z", forKey: "name")
            teams.object(at: IndexPath(row: 3, section: 0)).setValue("B", forKey: "name")
            context.processPendingChanges()
            #expect(names(teams.fetchedObjects) == ["B", "D", "F", "Z"])
            #expect(delegate.last?.objects.count == 2)
            #expect(delegate.problems.isEmpty, "\(delegate.problems)")
        }
    }

    @Test("membership follows the predicate: an update into it is an insert, out of it a delete; unsaved deletes leave at once")
    func membershipByPredicate() async throws {
        let dir = try TemporaryDirectory()
        try await leagueContext(dir).perform { (context: isolated ManagedObjectContext) throws in
            for (name, color) in [("Ants", "Red"), ("Bees", "Blue"), ("Cats", "Red")] { try team(context, name, color: color) }
            try context.save()
            var request = teamRequest()
            request.predicate = try FormatPredicate(format: "uniformColor == %@", "Red")
            let reds = FetchedResultsController(fetchRequest: request, managedObjectContext: context)
            try reds.performFetch()
            let delegate = RecordingDelegate(mirroring: reds)
            reds.delegate = delegate
            #expect(names(reds.fetchedObjects) == ["Ants", "Cats"])

            let bees = try #require(try context.fetch(FetchRequest(entityName: "Team", format: "name == 'Bees'")).first)
            bees.setValue("Red", forKey: "uniformColor")
            context.processPendingChanges()
            #expect(delegate.last?.lines() == ["insert ->0.1 Bees"])

            reds.object(at: IndexPath(row: 0, section: 0)).setValue("Green", forKey: "uniformColor")
            context.processPendingChanges()
            #expect(delegate.last?.lines() == ["delete 0.0>- Ants"])

            let new = try team(context, "Aardvarks", color: "Blue")
            context.processPendingChanges()
            #expect(delegate.batches.count == 2, "an insert that doesn't match is no batch")
            new.setValue("Red", forKey: "uniformColor")
            context.processPendingChanges()
            #expect(delegate.last?.lines() == ["insert ->0.0 Aardvarks"])

            context.delete(bees)
            context.processPendingChanges()
            #expect(delegate.last?.lines() == ["delete 0.1>- Bees"])
            #expect(names(reds.fetchedObjects) == ["Aardvarks", "Cats"])
            #expect(delegate.problems.isEmpty, "\(delegate.problems)")
        }
    }

    @Test("a changed fetchRequest takes effect at the next performFetch, and tracking follows it (filtering as the user types)")
    func changedRequest() async throws {
        let dir = try TemporaryDirectory()
        try await leagueContext(dir).perform { (context: isolated ManagedObjectContext) throws in
            for name in ["Crew", "Comets", "Fire"] { try team(context, name) }
            try context.save()
            let (teams, delegate) = try followedTeams(context)
            teams.fetchRequest.predicate = try FormatPredicate(format: "name BEGINSWITH[c] %@", "c")
            #expect(names(teams.fetchedObjects) == ["Comets", "Crew", "Fire"], "not before performFetch")
            try team(context, "Foxes")
            context.processPendingChanges()
            #expect(names(teams.fetchedObjects) == ["Comets", "Crew", "Fire", "Foxes"], "tracking the request last fetched")
            try teams.performFetch()
            #expect(names(teams.fetchedObjects) == ["Comets", "Crew"])
            delegate.mirror = shown(teams)
            try team(context, "Cats")
            try team(context, "Dogs")
            context.processPendingChanges()
            #expect(delegate.last?.lines() == ["insert ->0.0 Cats"])
            #expect(delegate.problems.isEmpty, "\(delegate.problems)")
        }
    }

    @Test("changes between two processPendingChanges are one batch; a save flushes what is pending first")
    func oneBatchPerEvent() async throws {
        let dir = try TemporaryDirectory()
        try await leagueContext(dir).perform { (context: isolated ManagedObjectContext) throws in
            let (teams, delegate) = try followedTeams(context)
            for name in ["B", "A", "C"] { try team(context, name) }
            #expect(delegate.batches.isEmpty, "nothing before the event ends")
            #expect(names(teams.fetchedObjects).isEmpty, "the results change with the batch")
            context.processPendingChanges()
            #expect(delegate.batches.count == 1)
            #expect(delegate.last?.lines() == ["insert ->0.0 A", "insert ->0.1 B", "insert ->0.2 C"])
            try team(context, "D")
            try context.save()
            #expect(delegate.batches.count == 2, "the save posted what was pending; making IDs permanent moved nothing")
            #expect(delegate.last?.lines() == ["insert ->0.3 D"])
            #expect(delegate.problems.isEmpty, "\(delegate.problems)")
        }
    }

    @Test("undo, redo, rollback and reset are reported as batches")
    func undoRedoRollbackReset() async throws {
        let dir = try TemporaryDirectory()
        try await leagueContext(dir).perform { (context: isolated ManagedObjectContext) throws in
            for name in ["B", "D"] { try team(context, name) }
            try context.save()
            let (teams, delegate) = try followedTeams(context)

            try team(context, "C")
            context.processPendingChanges()
            #expect(delegate.last?.lines() == ["insert ->0.1 C"])
            try context.undo()
            context.processPendingChanges()
            #expect(delegate.last?.lines() == ["delete 0.1>- ?"], "the undone insert is invalidated")
            try context.redo()
            context.processPendingChanges()
            #expect(delegate.last?.lines() == ["insert ->0.1 C"], "redo brings the same object back")

            teams.object(at: IndexPath(row: 0, section: 0)).setValue("E", forKey: "name")
            context.processPendingChanges()
            #expect(names(teams.fetchedObjects) == ["C", "D", "E"])
            try context.undo()
            context.processPendingChanges()
            #expect(delegate.last?.lines() == ["move 0.2>0.0 B"])

            try context.save()
            let d = teams.object(at: IndexPath(row: 2, section: 0))
            context.delete(d)
            context.processPendingChanges()
            #expect(delegate.last?.lines() == ["delete 0.2>- D"])
            try context.undo()
            context.processPendingChanges()
            #expect(delegate.last?.lines() == ["insert ->0.2 D"])

            // Rollback: an unsaved insert goes, an unsaved rename goes back.
            try team(context, "A")
            teams.object(at: IndexPath(row: 1, section: 0)).setValue("Z", forKey: "name")
            context.processPendingChanges()
            #expect(names(teams.fetchedObjects) == ["A", "B", "D", "Z"])
            context.rollback()
            context.processPendingChanges()
            #expect(names(teams.fetchedObjects) == ["B", "C", "D"])
            let rolledBack = delegate.last?.lines() ?? []
            #expect(rolledBack.contains("delete 0.0>- ?") && rolledBack.contains("move 0.3>0.1 C"), "\(rolledBack)")

            // Reset: every object is a new instance (updates), unsaved inserts go.
            try team(context, "A")
            context.processPendingChanges()
            let before = teams.fetchedObjects ?? []
            context.reset()
            #expect(delegate.last?.lines() == ["delete 0.0>- ?", "update 0.1>0.0 B", "update 0.2>0.1 C", "update 0.3>0.2 D"])
            #expect(names(teams.fetchedObjects) == ["B", "C", "D"])
            #expect(zip(before.dropFirst(), teams.fetchedObjects ?? []).allSatisfy { $0 !== $1 && $0.objectID == $1.objectID })
            #expect(teams.fetchedObjects?.allSatisfy { $0.managedObjectContext != nil } == true)
            #expect(delegate.problems.isEmpty, "\(delegate.problems)")
        }
    }

    @Test("refresh(_:mergeChanges:): without merging, an unsaved rename is dropped and the object moves back; with merging it stays, updated")
    func refreshedObjects() async throws {
        let dir = try TemporaryDirectory()
        try await leagueContext(dir).perform { (context: isolated ManagedObjectContext) throws in
            for name in ["B", "D", "F"] { try team(context, name) }
            try context.save()
            let (teams, delegate) = try followedTeams(context)
            let b = teams.object(at: IndexPath(row: 0, section: 0))
            b.setValue("G", forKey: "name")
            context.processPendingChanges()
            #expect(names(teams.fetchedObjects) == ["D", "F", "G"])
            context.refresh(b, mergeChanges: true)
            context.processPendingChanges()
            #expect(delegate.last?.lines() == ["update 0.2>0.2 G"], "refreshed, its unsaved rename kept")
            context.refresh(b, mergeChanges: false)
            context.processPendingChanges()
            #expect(delegate.last?.lines() == ["move 0.2>0.0 B"], "the rename dropped: back in first place")
            #expect(names(teams.fetchedObjects) == ["B", "D", "F"])
            #expect(delegate.problems.isEmpty, "\(delegate.problems)")
        }
    }

    @Test("another context's save, merged by mergeChanges(fromContextDidSave:) or mergeStoreChanges(), is reported")
    func mergeFromAnotherContext() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        let other = privateContext(coordinator, name: "other")
        try await privateContext(coordinator, name: "main").perform { (context: isolated ManagedObjectContext) throws in
            for name in ["B", "D"] { try team(context, name) }
            try context.save()
            let (teams, delegate) = try followedTeams(context)

            /// Runs `body` in the other context, saves, and returns its did-save.
            func elsewhere(_ body: @escaping @Sendable (isolated ManagedObjectContext) throws -> Void) throws -> ContextDidSave {
                try other.performAndWait { (context: isolated ManagedObjectContext) throws -> ContextDidSave in
                    var heard: ContextDidSave?
                    let token = context.addObserver { change in
                        if case .didSave(let save) = change.notification { heard = save }
                    }
                    defer { context.removeObserver(token) }
                    try body(context)
                    try context.save()
                    return try #require(heard)
                }
            }
            context.mergeChanges(fromContextDidSave: try elsewhere { context in try team(context, "C") })
            #expect(delegate.last?.lines() == ["insert ->0.1 C"])
            #expect(delegate.batches.count == 1, "did-merge and its objects-did-change are one batch")

            context.mergeChanges(fromContextDidSave: try elsewhere { context in
                try context.fetch(FetchRequest(entityName: "Team", format: "name == 'B'")).first?.setValue("E", forKey: "name")
            })
            #expect(delegate.last?.lines() == ["move 0.0>0.2 E"])

            _ = try elsewhere { context in
                if let d = try context.fetch(FetchRequest(entityName: "Team", format: "name == 'D'")).first { context.delete(d) }
                try team(context, "A")
            }
            try context.mergeStoreChanges()
            let merged = delegate.last?.lines() ?? []
            #expect(merged.contains("delete 0.1>- ?") && merged.contains("insert ->0.0 A"), "\(merged)")
            #expect(names(teams.fetchedObjects) == ["A", "C", "E"])
            #expect(delegate.batches.count == 3)
            #expect(delegate.problems.isEmpty, "\(delegate.problems)")
        }
    }

    @Test("the difference callback replaces the others; applied to the old IDs it gives the new IDs, temporary IDs made permanent included")
    func differenceCallback() async throws {
        let dir = try TemporaryDirectory()
        try await leagueContext(dir).perform { (context: isolated ManagedObjectContext) throws in
            for name in ["B", "D", "F"] { try team(context, name) }
            try context.save()
            let teams = FetchedResultsController(fetchRequest: teamRequest(), managedObjectContext: context)
            try teams.performFetch()
            let delegate = DifferenceDelegate(mirroring: teams)
            teams.delegate = delegate

            try team(context, "A")
            teams.object(at: IndexPath(row: 2, section: 0)).setValue("C", forKey: "name")  // F to C
            context.delete(teams.object(at: IndexPath(row: 0, section: 0)))                  // B
            context.processPendingChanges()
            #expect(delegate.differences.count == 1)
            #expect(names(teams.fetchedObjects) == ["A", "C", "D"])
            #expect(delegate.differences.last?.insertions.count == 2 && delegate.differences.last?.removals.count == 2)

            try context.save()  // A's temporary ID becomes permanent
            #expect(delegate.differences.count == 2)
            #expect(delegate.ids.allSatisfy { !$0.isTemporaryID })
            teams.object(at: IndexPath(row: 1, section: 0)).setValue("blue", forKey: "uniformColor")
            context.processPendingChanges()
            #expect(delegate.differences.count == 2, "an update in place isn't part of a difference")
            #expect(delegate.otherCalls == 0, "no other callback for a delegate with the difference form")
            #expect(delegate.problems.isEmpty, "\(delegate.problems)")

            // With sections the difference form isn't used (Core Data's rule).
            let sectioned = FetchedResultsController(fetchRequest: teamRequest(), managedObjectContext: context, sectionNameKeyPath: "name")
            try sectioned.performFetch()
            let sectionDelegate = DifferenceDelegate(mirroring: sectioned)
            sectioned.delegate = sectionDelegate
            try team(context, "Q")
            context.processPendingChanges()
            #expect(sectionDelegate.differences.isEmpty)
            #expect(sectionDelegate.otherCalls == 3, "will, the insert, did")
        }
    }

    @Test("errors: no sort descriptors, sections out of order, unknown entity or key, a to-many section key, another result type")
    func errors() async throws {
        let dir = try TemporaryDirectory()
        try await leagueContext(dir).perform { (context: isolated ManagedObjectContext) throws in
            for (name, color) in [("Ants", "Red"), ("Bees", "Blue"), ("Cats", "Red")] { try team(context, name, color: color) }
            try context.save()
            func failure(_ request: FetchRequest<ManagedObject>, section: String? = nil, in context: isolated ManagedObjectContext) -> String {
                let controller = FetchedResultsController(fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: section)
                do {
                    try controller.performFetch()
                    return "no error"
                } catch {
                    #expect(controller.fetchedObjects == nil, "nothing installed")
                    return "\(error)"
                }
            }
            #expect(failure(FetchRequest(entityName: "Team"), in: context).contains("needs at least one sort descriptor"))
            let outOfOrder = failure(teamRequest(), section: "uniformColor", in: context)
            #expect(outOfOrder.contains("out-of-order section name \"Red\"") && outOfOrder.contains("\"Blue\""), "\(outOfOrder)")
            #expect(failure(FetchRequest(entityName: "Tem", sortDescriptors: [FetchSortDescriptor(key: "name")]), in: context) == "unknown entity \"Tem\"")
            #expect(failure(teamRequest(), section: "colour", in: context).contains("entity Team has no property \"colour\""))
            #expect(failure(teamRequest(), section: "players", in: context).contains("to-many"))
            #expect(failure(teamRequest(), section: "", in: context).contains("empty key path"))
            #expect(failure(FetchRequest(entityName: "Team", sortDescriptors: [FetchSortDescriptor(key: "nmae")]), in: context).contains("\"nmae\""))
            var badPredicate = teamRequest()
            badPredicate.predicate = try FormatPredicate(format: "colour == 'Red'")
            #expect(failure(badPredicate, in: context).contains("\"colour\""))
            var ids = teamRequest()
            ids.resultType = .managedObjectID
            #expect(failure(ids, in: context).contains("resultType"))

            // A failed performFetch leaves earlier results as they were.
            let teams = FetchedResultsController(fetchRequest: teamRequest(), managedObjectContext: context)
            try teams.performFetch()
            #expect(names(teams.fetchedObjects) == ["Ants", "Bees", "Cats"])
        }
    }

    @Test("no delegate, no tracking: the results stay as fetched; set a delegate and the next batch catches up")
    func trackingNeedsADelegate() async throws {
        let dir = try TemporaryDirectory()
        try await leagueContext(dir).perform { (context: isolated ManagedObjectContext) throws in
            for name in ["B", "D"] { try team(context, name) }
            try context.save()
            let teams = FetchedResultsController(fetchRequest: teamRequest(), managedObjectContext: context)
            try teams.performFetch()
            try team(context, "A")
            context.processPendingChanges()
            #expect(names(teams.fetchedObjects) == ["B", "D"], "Core Data's rule")
            let delegate = RecordingDelegate(mirroring: teams)
            teams.delegate = delegate
            try team(context, "C")
            context.processPendingChanges()
            #expect(names(teams.fetchedObjects) == ["A", "B", "C", "D"])
            #expect(
                delegate.last?.lines() == ["insert ->0.0 A", "insert ->0.2 C", "update 0.0>0.1 B", "update 0.1>0.3 D"],
                "what changed while untracked isn't known: everything that stays is updated")
            #expect(delegate.problems.isEmpty, "\(delegate.problems)")
        }
    }

    @Test("a controller doesn't keep its context or itself alive and stops being told when it goes")
    func lifetime() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        weak var weakContext: ManagedObjectContext?
        do {
            let context = privateContext(coordinator)
            weakContext = context
            try await context.perform { (context: isolated ManagedObjectContext) throws in
                weak var weakController: AnyFetchedResultsController?
                do {
                    let teams = FetchedResultsController(fetchRequest: teamRequest(), managedObjectContext: context)
                    let delegate = RecordingDelegate(mirroring: teams)
                    teams.delegate = delegate
                    try teams.performFetch()
                    weakController = teams
                    #expect(context.core.changeTrackers.count == 1)
                    try team(context, "A")
                    context.processPendingChanges()
                    #expect(delegate.batches.count == 1)
                }
                #expect(weakController == nil, "nothing else holds the controller")
                #expect(context.core.changeTrackers.isEmpty, "it took itself out")
                try team(context, "B")
                context.processPendingChanges()
            }
        }
        #expect(weakContext == nil, "the context isn't kept alive")
    }

    @Test("kept in the context's userInfo, a controller and its delegate follow changes made in later perform blocks, another context's merged save included; freed with the context")
    func keptAcrossPerformBlocks() async throws {
        let dir = try TemporaryDirectory()
        let coordinator = try openCoordinator(dir, model: try SeedModels.leagueManager)
        weak var weakContext: ManagedObjectContext?
        do {
            let context = privateContext(coordinator)
            weakContext = context
            try await context.perform { (context: isolated ManagedObjectContext) throws in
                context.automaticallyMergesChangesFromParent = true
                try team(context, "Herons")
                try context.save()
                let (teams, delegate) = try followedTeams(context)
                context.userInfo["teams"] = teams
                context.userInfo["teamList"] = delegate
            }
            // A later block inserts and saves; another context saves a team too.
            try await context.perform { (context: isolated ManagedObjectContext) throws in
                try team(context, "Otters")
                try context.save()
            }
            try await privateContext(coordinator).perform { (other: isolated ManagedObjectContext) throws in
                try team(other, "Ibis")
                try other.save()
            }
            try await context.perform { (context: isolated ManagedObjectContext) throws in
                context.processPendingChanges()
                let teams = try #require(context.userInfo["teams"] as? FetchedResultsController<ManagedObject>)
                let delegate = try #require(context.userInfo["teamList"] as? RecordingDelegate)
                #expect(names(teams.fetchedObjects) == ["Herons", "Ibis", "Otters"])
                #expect(delegate.problems.isEmpty, "\(delegate.problems)")
                #expect(delegate.batches.count >= 2, "the insert in a later block and the merged save were heard")
                #expect(names(delegate.mirror.flatMap(\.objects)) == ["Herons", "Ibis", "Otters"], "the batches, applied, give the table")
            }
        }
        #expect(weakContext == nil, "the controller in userInfo doesn't keep its context alive")
    }

    @Test("a localizedStandard (numeric, case-insensitive) sort places changes as a fetch orders them")
    func numericSortTracked() async throws {
        let dir = try TemporaryDirectory()
        try await leagueContext(dir).perform { (context: isolated ManagedObjectContext) throws in
            for name in ["file1", "File2", "file10", "file100"] { try team(context, name) }
            try context.save()
            let request = FetchRequest(entityName: "Team", sortDescriptors: [.localizedStandard(key: "name")])
            let teams = FetchedResultsController(fetchRequest: request, managedObjectContext: context)
            try teams.performFetch()
            #expect(names(teams.fetchedObjects) == ["file1", "File2", "file10", "file100"])
            let delegate = RecordingDelegate(mirroring: teams)
            teams.delegate = delegate
            try team(context, "FILE9")
            context.processPendingChanges()
            #expect(names(teams.fetchedObjects) == ["file1", "File2", "FILE9", "file10", "file100"])
            teams.fetchedObjects?.first { $0.value(forKey: "name") as? String == "file100" }?.setValue("file3", forKey: "name")
            context.processPendingChanges()
            let expected = ["file1", "File2", "file3", "FILE9", "file10"]
            #expect(names(teams.fetchedObjects) == expected)
            #expect(names(try context.fetch(request)) == expected, "a fresh fetch agrees")
            #expect(names(delegate.mirror.flatMap(\.objects)) == expected, "the batches, applied, give the table")
            #expect(delegate.problems.isEmpty, "\(delegate.problems)")
        }
    }

    @Test("objects tied under every sort descriptor keep store order: stored by primary key, then unsaved inserts in insertion order")
    func tiesKeepStoreOrder() async throws {
        let dir = try TemporaryDirectory()
        try await leagueContext(dir).perform { (context: isolated ManagedObjectContext) throws in
            for name in ["s1", "s2", "s3"] { try team(context, name, color: "Red") }
            try context.save()
            let request = FetchRequest(entityName: "Team", sortDescriptors: [FetchSortDescriptor(key: "uniformColor")])
            let teams = FetchedResultsController(fetchRequest: request, managedObjectContext: context)
            try teams.performFetch()
            let delegate = RecordingDelegate(mirroring: teams)
            teams.delegate = delegate
            let fresh = FetchedResultsController(fetchRequest: request, managedObjectContext: context)
            func check(_ note: Comment, in context: isolated ManagedObjectContext) throws {
                try fresh.performFetch()
                #expect(names(teams.fetchedObjects) == names(fresh.fetchedObjects), note)
                #expect(names(teams.fetchedObjects) == names(try context.fetch(request)), note)
            }
            try team(context, "i1", color: "Red")
            try team(context, "i2", color: "Red")
            context.processPendingChanges()
            try check("inserts after the stored objects, in insertion order", in: context)
            try team(context, "i3", color: "Red")
            teams.object(at: IndexPath(row: 0, section: 0)).setValue("Blue", forKey: "uniformColor")
            context.processPendingChanges()
            try check("after an update", in: context)
            teams.object(at: IndexPath(row: 0, section: 0)).setValue("Red", forKey: "uniformColor")
            try context.save()
            try check("after the save", in: context)
            #expect(delegate.problems.isEmpty, "\(delegate.problems)")
        }
    }

    @Test("a request with a fetch limit keeps the first n objects as the context changes")
    func fetchLimit() async throws {
        let dir = try TemporaryDirectory()
        try await leagueContext(dir).perform { (context: isolated ManagedObjectContext) throws in
            for name in ["B", "D", "F", "H"] { try team(context, name) }
            try context.save()
            var request = teamRequest()
            request.fetchLimit = 3
            let teams = FetchedResultsController(fetchRequest: request, managedObjectContext: context)
            try teams.performFetch()
            let delegate = RecordingDelegate(mirroring: teams)
            teams.delegate = delegate
            #expect(names(teams.fetchedObjects) == ["B", "D", "F"])
            try team(context, "A")
            context.processPendingChanges()
            #expect(names(teams.fetchedObjects) == ["A", "B", "D"])
            #expect(Set(delegate.last?.lines() ?? []) == ["insert ->0.0 A", "delete 0.2>- F"])
            context.delete(teams.object(at: IndexPath(row: 1, section: 0)))
            context.processPendingChanges()
            #expect(names(teams.fetchedObjects) == ["A", "D", "F"])
            #expect(delegate.problems.isEmpty, "\(delegate.problems)")
        }
    }

    @Test("randomized: after every batch, applying it to the old table gives the controller's table, which a fresh fetch agrees with")
    func randomized() async throws {
        let steps = ProcessInfo.processInfo.environment["STRATA_FRC_RANDOM_STEPS"].flatMap(Int.init) ?? 150
        let dir = try TemporaryDirectory()
        let model = try ManagedObjectModel {
            Entity("Item") {
                Attribute("name", .string)
                Attribute("group", .string)
                Attribute("rank", .int32, default: 0)
                Relationship("owner", to: "Owner", inverse: "items")
            }
            Entity("Owner") {
                Attribute("name", .string)
                Relationship("items", to: "Item", inverse: "owner", toMany: true)
            }
        }
        let coordinator = try openCoordinator(dir, model: model)
        let other = privateContext(coordinator, name: "other")
        try await privateContext(coordinator, name: "main").perform { (context: isolated ManagedObjectContext) throws in
            let seed = ProcessInfo.processInfo.environment["STRATA_FRC_RANDOM_SEED"].flatMap { UInt64($0) } ?? 0xF7C_2024
            var random = SeededGenerator(seed: seed)
            var counter = 0
            func unique(_ prefix: String) -> String {
                counter += 1
                return "\(prefix)\(String(format: "%05d", Int.random(in: 0..<90000, using: &random)))-\(counter)"
            }
            func items(_ context: isolated ManagedObjectContext) throws -> [ManagedObject] {
                try context.fetch(FetchRequest(entityName: "Item", sortDescriptors: [FetchSortDescriptor(key: "name")]))
            }
            func owners(_ context: isolated ManagedObjectContext) throws -> [ManagedObject] {
                try context.fetch(FetchRequest(entityName: "Owner", sortDescriptors: [FetchSortDescriptor(key: "name")]))
            }
            for _ in 0..<3 {
                let owner = try context.insertNewObject(forEntityName: "Owner")
                owner.setValue(unique("o"), forKey: "name")
            }
            for _ in 0..<12 {
                let item = try context.insertNewObject(forEntityName: "Item")
                item.setValue(unique("n"), forKey: "name")
                item.setValue("g\(Int.random(in: 0..<4, using: &random))", forKey: "group")
                item.setValue(Int32.random(in: 0..<6, using: &random), forKey: "rank")
                item.setValue(try owners(context).randomElement(using: &random), forKey: "owner")
            }
            try context.save()

            // The controllers under test, and the same requests for fresh fetches.
            var ranked = FetchRequest(entityName: "Item", sortDescriptors: [FetchSortDescriptor(key: "rank", ascending: false), FetchSortDescriptor(key: "name")])
            ranked.predicate = try FormatPredicate(format: "rank >= 2")
            let byGroup = FetchRequest(entityName: "Item", sortDescriptors: [FetchSortDescriptor(key: "group"), FetchSortDescriptor(key: "name")])
            let byOwner = FetchRequest(entityName: "Item", sortDescriptors: [FetchSortDescriptor(key: "owner.name"), FetchSortDescriptor(key: "name")])
            var named = FetchRequest(entityName: "Item", sortDescriptors: [FetchSortDescriptor(key: "name")])
            named.predicate = try FormatPredicate(format: "group != 'g0' AND owner.name != nil")
            let setups: [(FetchRequest<ManagedObject>, String?)] = [(ranked, nil), (byGroup, "group"), (byOwner, "owner.name")]
            var controllers: [(FetchedResultsController<ManagedObject>, RecordingDelegate)] = []
            for (request, section) in setups {
                let controller = FetchedResultsController(fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: section)
                try controller.performFetch()
                let delegate = RecordingDelegate(mirroring: controller)
                controller.delegate = delegate
                controllers.append((controller, delegate))
            }
            let differenced = FetchedResultsController(fetchRequest: named, managedObjectContext: context)
            try differenced.performFetch()
            let differenceDelegate = DifferenceDelegate(mirroring: differenced)
            differenced.delegate = differenceDelegate

            var operations: [String: Int] = [:]
            for step in 0..<steps {
                let roll = Int.random(in: 0..<100, using: &random)
                var operation = ""
                do {
                    switch roll {
                    case 0..<18:
                        operation = "insert"
                        for _ in 0..<Int.random(in: 1...3, using: &random) {
                            let item = try context.insertNewObject(forEntityName: "Item")
                            item.setValue(unique("n"), forKey: "name")
                            item.setValue("g\(Int.random(in: 0..<4, using: &random))", forKey: "group")
                            item.setValue(Int32.random(in: 0..<6, using: &random), forKey: "rank")
                            if Bool.random(using: &random) { item.setValue(try owners(context).randomElement(using: &random), forKey: "owner") }
                        }
                    case 18..<45:
                        operation = "update"
                        for _ in 0..<Int.random(in: 1...3, using: &random) {
                            guard let item = try items(context).randomElement(using: &random) else { break }
                            switch Int.random(in: 0..<4, using: &random) {
                            case 0: item.setValue(unique("n"), forKey: "name")
                            case 1: item.setValue("g\(Int.random(in: 0..<4, using: &random))", forKey: "group")
                            case 2: item.setValue(Int32.random(in: 0..<6, using: &random), forKey: "rank")
                            default: item.setValue(Bool.random(using: &random) ? try owners(context).randomElement(using: &random) : nil, forKey: "owner")
                            }
                        }
                    case 45..<55:
                        operation = "delete"
                        if let item = try items(context).randomElement(using: &random) { context.delete(item) }
                    case 55..<60:
                        operation = "owner"
                        switch Int.random(in: 0..<3, using: &random) {
                        case 0:
                            let owner = try context.insertNewObject(forEntityName: "Owner")
                            owner.setValue(unique("o"), forKey: "name")
                        case 1: try owners(context).randomElement(using: &random)?.setValue(unique("o"), forKey: "name")
                        default: if let owner = try owners(context).randomElement(using: &random) { context.delete(owner) }
                        }
                    case 60..<72:
                        operation = "save"
                        try context.save()
                    case 72..<80:
                        operation = "undo"
                        if context.canUndo { try context.undo() }
                    case 80..<85:
                        operation = "redo"
                        if context.canRedo { try context.redo() }
                    case 85..<88:
                        operation = "rollback"
                        context.rollback()
                    case 88..<90:
                        operation = "reset"
                        context.reset()
                    default:
                        operation = "merge"
                        try context.save()
                        let otherSeed = UInt64.random(in: 0..<UInt64.max, using: &random)
                        let save = try other.performAndWait { (context: isolated ManagedObjectContext) throws -> ContextDidSave? in
                            var random = SeededGenerator(seed: otherSeed)
                            var heard: ContextDidSave?
                            let token = context.addObserver { change in
                                if case .didSave(let save) = change.notification { heard = save }
                            }
                            defer { context.removeObserver(token) }
                            let all = try context.fetch(FetchRequest(entityName: "Item"))
                            if let item = all.randomElement(using: &random) { item.setValue(Int32.random(in: 0..<6, using: &random), forKey: "rank") }
                            if let item = all.randomElement(using: &random), Bool.random(using: &random) { context.delete(item) }
                            let item = try context.insertNewObject(forEntityName: "Item")
                            item.setValue("m\(otherSeed % 100_000)-\(step)", forKey: "name")
                            item.setValue("g\(Int.random(in: 0..<4, using: &random))", forKey: "group")
                            item.setValue(Int32.random(in: 0..<6, using: &random), forKey: "rank")
                            try context.save()
                            return heard
                        }
                        if Bool.random(using: &random), let save { context.mergeChanges(fromContextDidSave: save) } else { try context.mergeStoreChanges() }
                    }
                } catch {
                    operation += " (threw)"
                }
                operations[operation, default: 0] += 1
                context.processPendingChanges()

                for (index, (controller, delegate)) in controllers.enumerated() {
                    let fresh = FetchedResultsController(fetchRequest: setups[index].0, managedObjectContext: context, sectionNameKeyPath: setups[index].1)
                    try fresh.performFetch()
                    let matches = same(shown(controller), shown(fresh))
                    #expect(matches, "step \(step) (\(operation)), controller \(index) against a fresh fetch: \(firstDifference(shown(controller), shown(fresh)))")
                    #expect(delegate.problems.isEmpty, "step \(step) (\(operation)), controller \(index): \(delegate.problems)")
                    delegate.problems.removeAll()
                    if !matches { return }
                }
                let freshNamed = FetchedResultsController(fetchRequest: named, managedObjectContext: context)
                try freshNamed.performFetch()
                #expect(differenceDelegate.ids == freshNamed.fetchedObjects?.map(\.objectID), "step \(step) (\(operation)): difference form")
                #expect(differenceDelegate.problems.isEmpty, "step \(step) (\(operation)): \(differenceDelegate.problems)")
                differenceDelegate.problems.removeAll()
            }
            #expect(controllers.allSatisfy { !$0.1.batches.isEmpty })
            #expect(operations.keys.count >= 8, "\(operations)")
        }
    }

    @Test("a table of 10,000 rows with one object edited judges that one object, not the table")
    func oneEditInALargeTable() async throws {
        let dir = try TemporaryDirectory()
        try await leagueContext(dir).perform { (context: isolated ManagedObjectContext) throws in
            for index in 0..<10_000 { try team(context, String(format: "t%05d", index * 2)) }
            try context.save()
            let teams = FetchedResultsController(fetchRequest: teamRequest(), managedObjectContext: context)
            try teams.performFetch()
            #expect(teams.evaluations == 10_000)
            let delegate = RecordingDelegate(mirroring: teams)
            teams.delegate = delegate
            teams.evaluations = 0
            for edit in 0..<20 {
                teams.object(at: IndexPath(row: edit * 37, section: 0)).setValue(String(format: "t%05d", edit * 401 + 1), forKey: "name")
                context.processPendingChanges()
            }
            #expect(teams.evaluations == 20, "each batch judged the one object it changed")
            #expect(delegate.batches.count == 20)
            #expect(delegate.problems.isEmpty, "\(delegate.problems)")
        }
    }
}
