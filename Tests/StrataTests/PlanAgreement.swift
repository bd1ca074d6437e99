import Foundation
import Strata
import StrataPredicate
import Testing

/// The check every planner test makes: a fetch planned as the planner chooses returns what
/// the same predicate forced through a full scan (`NOT NOT`) returns (spec 0008: a plan
/// never changes a fetch's results).
enum PlanAgreement {
    /// The plan of `format` on `entity`, the planned fetch's objects and the forced full
    /// scan's, and whether they agree: the objects in order, the IDs
    /// (`fetchObjectIDs`), the count, and — with `pageKey` — a fetch sorted by it
    /// descending, offset 1, limit 3.
    static func check(
        _ context: isolated ManagedObjectContext, _ entity: String, _ format: String, _ arguments: [Any] = [],
        pending: Bool = true, variables: [String: AttributeValue] = [:], pageKey: String? = nil
    ) throws -> (plan: String, results: [ManagedObjectID], forced: [ManagedObjectID], agrees: Bool) {
        let predicate = try FormatPredicate(format: format, argumentArray: arguments)
        func request(_ predicate: FormatPredicate) -> FetchRequest<ManagedObject> {
            var request = FetchRequest(entityName: entity, predicate: predicate)
            request.includesPendingChanges = pending
            request.substitutionVariables = variables
            return request
        }
        let planned = request(predicate)
        let forced = request(FormatPredicate(.not(.not(predicate.node))))
        let plan = try context.explain(planned).description
        #expect(try context.explain(forced).description.hasPrefix("full scan"))
        let got = try context.fetch(planned).map(\.objectID)
        let want = try context.fetch(forced).map(\.objectID)
        let ids = try context.fetchObjectIDs(planned)
        let count = try context.count(for: planned)
        var same = got == want && ids == want && count == want.count
        if let pageKey {
            func page(_ request: FetchRequest<ManagedObject>) throws -> [ManagedObjectID] {
                var request = request
                request.sortDescriptors = [FetchSortDescriptor(key: pageKey, ascending: false)]
                request.fetchOffset = 1
                request.fetchLimit = 3
                return try context.fetch(request).map(\.objectID)
            }
            let (mine, theirs) = (try page(planned), try page(forced))
            same = same && mine == theirs
        }
        return (plan, got, want, same)
    }
}
