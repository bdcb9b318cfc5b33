package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Predicate;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;

/**
 * An RDMA device as {@code ibv_get_device_list} reports it. The list itself is freed before returning; a device
 * is opened by name ({@link VerbsContext#open(String)}).
 *
 * @param name           the device name, e.g. {@code mlx5_0} or {@code rxe0}
 * @param guid           the node GUID (host byte order)
 * @param nodeType       {@code enum ibv_node_type}
 * @param transportType  {@code enum ibv_transport_type}
 */
public record VerbsDevice(String name, long guid, int nodeType, int transportType) {

    /** The devices present; throws {@link VerbsException} if the list cannot be read (e.g. ENOSYS: no RDMA). */
    public static List<VerbsDevice> list() {
        List<VerbsDevice> devices = new ArrayList<>();
        withDeviceList(device -> {
            devices.add(describe(device));
            return false;
        });
        return devices;
    }

    /**
     * Calls {@code visitor} with each {@code struct ibv_device *} until it returns {@code true}; returns whether
     * one did. The list is freed afterwards (devices opened meanwhile stay valid, as rdma-core allows).
     */
    static boolean withDeviceList(Predicate<MemorySegment> visitor) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment count = arena.allocate(JAVA_INT);
            MemorySegment list = LibIbverbs.checkPointer("ibv_get_device_list",
                    (MemorySegment) LibIbverbs.IBV_GET_DEVICE_LIST.invokeExact(Errno.state(), count));
            try {
                int n = count.get(JAVA_INT, 0);
                MemorySegment array = list.reinterpret(ADDRESS.byteSize() * n);
                for (int i = 0; i < n; i++) {
                    if (visitor.test(array.getAtIndex(ADDRESS, i).reinterpret(IbvDevice.SIZE))) {
                        return true;
                    }
                }
                return false;
            } finally {
                LibIbverbs.IBV_FREE_DEVICE_LIST.invokeExact(list);
            }
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
    }

    static VerbsDevice describe(MemorySegment device) {
        try {
            MemorySegment name = (MemorySegment) LibIbverbs.IBV_GET_DEVICE_NAME.invokeExact(device);
            long guid = (long) LibIbverbs.IBV_GET_DEVICE_GUID.invokeExact(device);
            return new VerbsDevice(name.reinterpret(64).getString(0), Long.reverseBytes(guid),
                    (int) IbvDevice.NODE_TYPE.get(device, 0L), (int) IbvDevice.TRANSPORT_TYPE.get(device, 0L));
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
    }
}
