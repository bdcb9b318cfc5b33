package io.netty.contrib.channel.rdma;

import io.netty.contrib.channel.rdma.internal.memory.MemoryRegistrar;
import io.netty.contrib.channel.rdma.internal.verbs.DeviceAttributes;
import io.netty.contrib.channel.rdma.internal.verbs.IbvAccessFlags;
import io.netty.contrib.channel.rdma.internal.verbs.MemoryRegion;
import io.netty.contrib.channel.rdma.internal.verbs.NativeLibraries;
import io.netty.contrib.channel.rdma.internal.verbs.ProtectionDomain;
import io.netty.contrib.channel.rdma.internal.verbs.VerbsContext;
import io.netty.util.internal.logging.InternalLogger;
import io.netty.util.internal.logging.InternalLoggerFactory;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * What the process shares per RDMA device while RDMA event loops run: one protection domain (queue pairs and
 * the memory they send from must be in the same one) and the registered-memory allocator whose chunks live in
 * it. Created on first use; freed when the last {@link RdmaIoHandler} is destroyed, so that shutting every
 * event loop group down leaves no device object behind (buffers still held then fail on access).
 */
final class RdmaDevices {
    private static final InternalLogger logger = InternalLoggerFactory.getInstance(RdmaDevices.class);
    private static final Map<Long, Device> DEVICES = new HashMap<>();
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
            List<VerbsContext> contexts = VerbsContext.cmDevices();
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
