package io.netty.contrib.channel.rdma;

import io.netty.contrib.channel.rdma.internal.memory.MemoryRegistrar;
import io.netty.contrib.channel.rdma.internal.verbs.DeviceAttributes;
import io.netty.contrib.channel.rdma.internal.verbs.IbvAccessFlags;
import io.netty.contrib.channel.rdma.internal.verbs.MemoryRegion;
import io.netty.contrib.channel.rdma.internal.verbs.NativeLibraries;
import io.netty.contrib.channel.rdma.internal.verbs.ProtectionDomain;
import io.netty.contrib.channel.rdma.internal.verbs.VerbsContext;
import io.netty.util.concurrent.GlobalEventExecutor;
import io.netty.util.internal.logging.InternalLogger;
import io.netty.util.internal.logging.InternalLoggerFactory;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * What the process shares per RDMA device while RDMA event loops run: one protection domain (queue pairs and
 * the memory they send from must be in the same one) and the registered-memory allocator whose chunks live in
 * it. Created on first use; freed when the last {@link RdmaIoHandler} is destroyed, so that shutting every
 * event loop group down leaves no device object behind (buffers still held then fail on access).
 */
final class RdmaDevices {
    private static final InternalLogger logger = InternalLoggerFactory.getInstance(RdmaDevices.class);
    private static final Map<Long, Device> DEVICES = new HashMap<>();
    /** Contexts of removed devices whose objects are being freed: not opened again meanwhile. */
    private static final java.util.Set<Long> REMOVING = new java.util.HashSet<>();
    /**
     * Contexts of removed devices, freed here, that librdmacm may still list (the kernel reports the removal to
     * rdma_cm ids before it stops listing the device): nothing is made on them again. Forgotten once a look finds
     * them gone from the list (the address may then be a new context's).
     */
    private static final java.util.Set<Long> GONE = new java.util.HashSet<>();
    /**
     * librdmacm's device list, held while devices are open here, so that librdmacm never closes the context of a
     * removed device before the objects made from it are freed ({@link VerbsContext#pinCmDevices()}); taken again
     * at every {@link #look()}.
     */
    private static VerbsContext.CmDevices pin;
    /** Earlier lists, still listing a removed device whose objects are being freed: given back once none is. */
    private static final List<VerbsContext.CmDevices> HELD = new ArrayList<>();
    /** The periodic {@link #look()} while devices are open. */
    private static java.util.concurrent.ScheduledFuture<?> watch;
    private static final long LOOK_MILLIS = 1000;
    /** A removed device's objects could not all be freed: no list is given back any more. */
    private static boolean keepLists;
    private static int handlers;
    private static Device defaultDevice;
    /** The pages of the allocators created from now on, chosen while no device is open. */
    private static RdmaIoHandlerConfig.HugePages hugePages = RdmaIoHandlerConfig.HugePages.AUTO;
    /** Whether a loop asking for other pages than the open devices' was logged (once until they are freed). */
    private static boolean otherPagesLogged;

    private RdmaDevices() {
    }

    /**
     * @param windows whether the device binds type-2 memory windows, with which each receive ring is writable on
     *                its own connection's queue pair only
     * @param maxSge  the scatter/gather entries a work request may have ({@code max_sge})
     * @param replaysWindowWork whether a retransmission runs the memory-window work requests of the send queue
     *                again (kernel rxe, {@link #isKernelRxe}): receive rings are then not offered by default
     */
    record Device(VerbsContext context, ProtectionDomain pd, RdmaByteBufAllocator allocator, boolean windows,
                  int maxSge, boolean replaysWindowWork) {
    }

    /** {@code vendor_id} of the Linux kernel's Soft-RoCE ({@code RXE_VENDOR_ID} of its {@code rxe_param.h}). */
    private static final int RXE_VENDOR_ID = 0xFFFFFF;

    /**
     * Whether {@code attributes} are kernel rxe's: its vendor id and part 0, with the system's libibverbs (the
     * project's software device reports the same ids, so that perftest takes its generic path, but does not replay).
     * rxe's requester runs a BIND_MW or LOCAL_INV when its index reaches it, and a retransmission moves that index
     * back to the oldest unacknowledged request, so every bind and invalidation after it runs again: a window bound
     * twice or invalidated under a key it no longer has fails, and the queue pair with it (docs/faults.md, finding 1).
     */
    static boolean isKernelRxe(DeviceAttributes attributes, boolean softwareDevice) {
        return !softwareDevice && attributes.vendorId() == RXE_VENDOR_ID && attributes.vendorPartId() == 0;
    }

    static synchronized Device of(VerbsContext context) {
        if (REMOVING.contains(context.address()) || GONE.contains(context.address()) || !context.isOpen()) {
            throw new IllegalStateException("RDMA device " + context + " was removed");
        }
        if (pin == null) {
            pin = VerbsContext.pinCmDevices();
            watch = GlobalEventExecutor.INSTANCE.scheduleWithFixedDelay(RdmaDevices::look, LOOK_MILLIS, LOOK_MILLIS,
                    TimeUnit.MILLISECONDS);
        }
        if (pin.contexts().stream().noneMatch(c -> c.address() == context.address())) {
            // A device added since the list was taken: listed (so referenced) too before anything is made from it.
            HELD.add(pin);
            pin = VerbsContext.pinCmDevices();
        }
        return DEVICES.computeIfAbsent(context.address(), a -> {
            ProtectionDomain pd = context.allocPd();
            boolean windows;
            int maxSge;
            boolean replays;
            try {
                DeviceAttributes attributes = context.queryDevice();
                windows = attributes.supportsType2Windows();
                maxSge = attributes.maxSge();
                replays = isKernelRxe(attributes, NativeLibraries.isSoftwareDevice());
            } catch (RuntimeException e) {
                // What every device supports: a header and a payload per SEND.
                windows = false;
                maxSge = 2;
                replays = false;
            }
            return new Device(context, pd, new RdmaByteBufAllocator(new PdRegistrar(pd),
                    RdmaByteBufAllocator.DEFAULT_CHUNK_SIZE, RdmaByteBufAllocator.DEFAULT_MAX_POOLED_CAPACITY,
                    RdmaByteBufAllocator.DEFAULT_MAX_EMPTY_CHUNKS, hugePages), windows, maxSge, replays);
        });
    }

    /** The allocator of the first device rdma_cm reports: the default of every channel. */
    static synchronized RdmaByteBufAllocator defaultAllocator() {
        if (defaultDevice == null) {
            Rdma.ensureAvailability();
            List<VerbsContext> contexts = new ArrayList<>(VerbsContext.cmDevices());
            // A removed device librdmacm still lists is no one's default.
            contexts.removeIf(c -> REMOVING.contains(c.address()) || GONE.contains(c.address()));
            if (contexts.isEmpty()) {
                throw new IllegalStateException("rdma_get_devices reports no RDMA device");
            }
            defaultDevice = of(contexts.get(0));
        }
        return defaultDevice.allocator();
    }

    /**
     * A loop factory was made with {@code pages}: while no device is open, the allocators created next use them (so
     * that code asking for {@link #defaultAllocator()} before the loops have started gets the loops' pages).
     */
    static synchronized void prefer(RdmaIoHandlerConfig.HugePages pages) {
        if (DEVICES.isEmpty()) {
            hugePages = pages;
        }
    }

    /** An event loop starts using the devices; while none is open its {@code pages} are the allocators' pages. */
    static synchronized void retain(RdmaIoHandlerConfig.HugePages pages) {
        handlers++;
        if (DEVICES.isEmpty()) {
            hugePages = pages;
        } else if (pages != hugePages && !otherPagesLogged) {
            otherPagesLogged = true;
            logger.warn("RdmaIoHandlerConfig.hugePages({}) ignored: the registered pool is shared by every RDMA loop"
                    + " of the process and uses {} (chosen by the loops that opened the device)", pages, hugePages);
        }
    }

    /** An event loop stopped; the last one frees every device's allocator and protection domain. */
    static synchronized void release() {
        if (--handlers > 0) {
            return;
        }
        List<Device> devices = new ArrayList<>(DEVICES.values());
        DEVICES.clear();
        otherPagesLogged = false;
        defaultDevice = null;
        for (Device device : devices) {
            try {
                device.allocator().close();
                device.pd().close();
            } catch (RuntimeException e) {
                logger.warn("failed to free the protection domain of {}", device.context(), e);
            }
        }
        stopWatching();
    }

    /** No device open, none being removed: librdmacm's list is given back and no longer looked at. */
    private static synchronized void stopWatching() {
        if (pin != null && REMOVING.isEmpty() && DEVICES.isEmpty() && !keepLists) {
            watch.cancel(false);
            watch = null;
            giveBack();
            pin.close();
            pin = null;
        }
    }

    /**
     * Every second while devices are open: takes librdmacm's device list again, which makes librdmacm look at which
     * devices exist. A device the previous list had and this one lacks was removed: if the process has objects on
     * it, they are freed first ({@link #removed}: a removal that no rdma_cm id reported, e.g. of a device whose
     * connections are all closed); then the previous list is given back, and with it librdmacm's last reference to
     * the removed device, whose context it then closes. Without this, a process that merely has a device open (every
     * process that asked librdmacm for its devices has all of them open) would block its removal until it exits.
     */
    private static synchronized void look() {
        if (pin == null) {
            return;
        }
        VerbsContext.CmDevices fresh;
        try {
            fresh = VerbsContext.pinCmDevices();
        } catch (RuntimeException e) {
            // No device listed at all: librdmacm then drops none either (it keeps its list when it finds none).
            logger.debug("rdma_get_devices failed", e);
            return;
        }
        java.util.Set<Long> listed = new java.util.HashSet<>();
        for (VerbsContext c : fresh.contexts()) {
            listed.add(c.address());
        }
        for (VerbsContext c : pin.contexts()) {
            if (!listed.contains(c.address()) && DEVICES.containsKey(c.address())) {
                removed(c, "no longer listed by rdma_get_devices");
            }
        }
        GONE.retainAll(listed);
        HELD.add(pin);
        pin = fresh;
        giveBack();
    }

    /** Gives the earlier lists back unless a removed device's objects are still being freed. */
    private static synchronized void giveBack() {
        if (REMOVING.isEmpty() && !keepLists) {
            HELD.forEach(VerbsContext.CmDevices::close);
            HELD.clear();
        }
    }

    /** Whether the device whose context is at {@code contextAddress} is being removed or was let go of. */
    static synchronized boolean isRemoved(long contextAddress) {
        return REMOVING.contains(contextAddress) || GONE.contains(contextAddress);
    }

    /**
     * The device of {@code context} is being removed ({@code RDMA_CM_EVENT_DEVICE_REMOVAL} on an id bound to it; any
     * thread): every loop closes its channels and listeners on it with the returned cause and frees its queues
     * there; after the last, the device's allocator lets go of its registrations (held buffers stay usable), its
     * protection domain is freed and librdmacm is let close the context, so that the kernel can finish the removal
     * (kernel rxe waits for that). Every id on the device reports the removal: the first report does this, the others
     * only get the cause.
     */
    static String removed(VerbsContext context) {
        return removed(context, "RDMA_CM_EVENT_DEVICE_REMOVAL");
    }

    /** {@link #removed(VerbsContext)}, found out as {@code how} says. */
    static String removed(VerbsContext context, String how) {
        String name = context.isOpen() ? context.deviceName() : context.toString();
        String cause = "RDMA device " + name + " was removed (" + how + ")";
        Device device;
        synchronized (RdmaDevices.class) {
            device = DEVICES.remove(context.address());
            if (device == null || !REMOVING.add(context.address())) {
                return cause;
            }
            if (defaultDevice == device) {
                defaultDevice = null;
            }
        }
        logger.warn("{}: closing every connection and listener on it and releasing it", cause);
        PortStates.forget(name);
        java.util.Collection<RdmaIoHandler> loops = RdmaIoHandler.loops();
        java.util.concurrent.atomic.AtomicInteger left = new java.util.concurrent.atomic.AtomicInteger(
                loops.size() + 1);
        Runnable done = () -> {
            if (left.decrementAndGet() == 0) {
                free(device, name);
            }
        };
        for (RdmaIoHandler loop : loops) {
            try {
                loop.execute(() -> {
                    try {
                        loop.deviceRemoved(device, cause);
                    } finally {
                        done.run();
                    }
                });
            } catch (java.util.concurrent.RejectedExecutionException e) {
                // That loop is shutting down: its own destroy() frees what it has.
                done.run();
            }
        }
        done.run();
        return cause;
    }

    /**
     * For tests on the software device, which cannot remove a device: the device at {@code context}, reported removed
     * by the test, is back (as a device added again would be, found by the next connection or bind).
     */
    static synchronized void addedBack(VerbsContext context) {
        GONE.remove(context.address());
    }

    /** Whether the removed device at {@code context} has been released and is not made anything on again. */
    static synchronized boolean released(VerbsContext context) {
        return GONE.contains(context.address());
    }

    /** Every loop has let go of the removed {@code device}: what the process has on it goes, then its context. */
    private static void free(Device device, String name) {
        try {
            device.allocator().deviceRemoved();
        } catch (RuntimeException e) {
            logger.warn("failed to deregister the memory of the removed device {}", name, e);
        }
        boolean freed = true;
        try {
            device.pd().close();
        } catch (RuntimeException e) {
            freed = false;
            logger.warn("the protection domain of the removed device {} is still in use: its context stays open"
                    + " (and the kernel's removal waits) until the process exits", name, e);
        }
        synchronized (RdmaDevices.class) {
            if (!freed) {
                // librdmacm would close the context under objects still made from it.
                keepLists = true;
            }
            VerbsContext.forgetCm(device.context());
            REMOVING.remove(device.context().address());
            GONE.add(device.context().address());
            // A new look at the devices lets librdmacm see that this one is gone; giving the old list back then drops
            // the last reference to its context, which librdmacm closes.
            giveBack();
            logger.info("the removed RDMA device {} is released", name);
            if (handlers == 0) {
                stopWatching();
            }
        }
    }

    /** Registers allocator chunks in a protection domain, for local access only. */
    private record PdRegistrar(ProtectionDomain pd) implements MemoryRegistrar {
        @Override
        public Registration register(MemorySegment chunk) {
            MemoryRegion mr = pd.registerMemory(chunk, IbvAccessFlags.LOCAL_WRITE);
            return new Registration() {
                @Override
                public int lkey() {
                    return mr.lkey();
                }

                @Override
                public void close() {
                    mr.close();
                }
            };
        }
    }
}
