public import Foundation
public import StrataModel
import Synchronization

/// A model, a coordinator, a store and a main-queue context, set up together (Core Data's
/// `NSPersistentContainer`).
///
/// ```swift
/// let container = PersistentContainer(name: "League", managedObjectModel: model)
/// try container.loadPersistentStores()
/// try await container.viewContext.perform { context in ... }
/// ```
public final class PersistentContainer: Sendable {
    /// The container's name; the default store file is named after it.
    public let name: String
    /// The model.
    public var managedObjectModel: ManagedObjectModel { persistentStoreCoordinator.managedObjectModel }
    /// The coordinator.
    public let persistentStoreCoordinator: PersistentStoreCoordinator
    /// Where the store is: the first description's URL; by default
    /// `<application support>/<name>.strata`.
    public var storeURL: URL { persistentStoreDescriptions.first?.url ?? defaultStoreURL }
    /// The store's type: the first description's (default: event log).
    public var storeType: PersistentStore.StoreType { persistentStoreDescriptions.first?.type ?? .eventLog }
    private let defaultStoreURL: URL

    /// The descriptions ``loadPersistentStores()`` adds stores from
    /// (`persistentStoreDescriptions`): one, for ``storeURL`` and ``storeType``, until
    /// changed. Change a description in place or set the array before loading; Strata's
    /// coordinator holds one store, so loading more than one description fails.
    public var persistentStoreDescriptions: [PersistentStoreDescription] {
        get { descriptions.withLock { $0 } }
        set { descriptions.withLock { $0 = newValue } }
    }
    private let descriptions: Mutex<[PersistentStoreDescription]>

    /// The main-queue context (`viewContext`), created on first use.
    public var viewContext: ManagedObjectContext {
        lazyView.withLock { view in
            if let view { return view }
            let context = ManagedObjectContext(concurrencyType: .mainQueue, coordinator: persistentStoreCoordinator)
            view = context
            return context
        }
    }
    private let lazyView = Mutex<ManagedObjectContext?>(nil)

    /// Creates a container.
    public init(
        name: String, managedObjectModel: ManagedObjectModel, storeURL: URL? = nil,
        storeType: PersistentStore.StoreType = .eventLog
    ) {
        self.name = name
        persistentStoreCoordinator = PersistentStoreCoordinator(managedObjectModel: managedObjectModel)
        let url = storeURL ?? Self.defaultDirectoryURL().appendingPathComponent("\(name).strata")
        defaultStoreURL = url
        descriptions = Mutex([PersistentStoreDescription(url: url, type: storeType)])
    }

    /// The directory default stores go in: the user's application-support directory.
    public static func defaultDirectoryURL() -> URL {
        FileManager.default.urls(for: .applicationSupportDirectory, in: .userDomainMask).first
            ?? URL(fileURLWithPath: NSTemporaryDirectory())
    }

    /// Adds the store ``persistentStoreDescriptions`` describes (`loadPersistentStores`),
    /// creating its parent directory if needed
    /// (``PersistentStoreCoordinator/addPersistentStore(with:)``). No descriptions: nothing is
    /// added, as in Core Data.
    ///
    /// - Throws: ``PersistentStoreError/invalidDescription(_:)`` when there is more than one
    ///   description (the coordinator holds one store; nothing is added); what adding the
    ///   store throws.
    public func loadPersistentStores() throws {
        let descriptions = persistentStoreDescriptions
        guard descriptions.count <= 1 else {
            throw PersistentStoreError.invalidDescription(
                "the container has \(descriptions.count) store descriptions (\(descriptions.map(\.description).joined(separator: ", "))), but a Strata coordinator holds one store; nothing was loaded")
        }
        guard let description = descriptions.first else { return }
        // A URL that isn't a file URL is refused by the coordinator, naming it.
        if description.type == .eventLog, let url = description.url, url.isFileURL, url.path != "/dev/null", !description.isReadOnly {
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        }
        try persistentStoreCoordinator.addPersistentStore(with: description)
    }

    /// Opens the store and calls `completionHandler` with it, or with nil and the error —
    /// Core Data's `loadPersistentStores(completionHandler:)`, whose handler gets the store's
    /// description (here the store itself: its `url` and `type`). The handler runs before
    /// this returns, as Core Data's does for a store added synchronously.
    ///
    /// ```swift
    /// container.loadPersistentStores { store, error in
    ///     if let error { print("Unresolved error \(error)") }
    /// }
    /// ```
    public func loadPersistentStores(completionHandler: (PersistentStore?, (any Error)?) -> Void) {
        do {
            try loadPersistentStores()
            completionHandler(persistentStoreCoordinator.persistentStores.first, nil)
        } catch {
            completionHandler(nil, error)
        }
    }

    /// A new private-queue context on the coordinator (`newBackgroundContext()`).
    public func newBackgroundContext() -> ManagedObjectContext {
        ManagedObjectContext(concurrencyType: .privateQueue, coordinator: persistentStoreCoordinator)
    }

    /// Runs `body` on a new background context (`performBackgroundTask`).
    public func performBackgroundTask<T: Sendable>(_ body: @Sendable (isolated ManagedObjectContext) throws -> T) async throws -> T {
        try await newBackgroundContext().perform(body)
    }
}
