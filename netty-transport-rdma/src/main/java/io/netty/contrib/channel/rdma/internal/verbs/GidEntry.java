package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;

import static io.netty.contrib.channel.rdma.internal.verbs.Errno.CAPTURE;
import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * One entry of a port's GID table as {@code ibv_query_gid_ex} (rdma-core 32+, the exported
 * {@code _ibv_query_gid_ex}) reports it: {@code struct ibv_gid_entry}.
 *
 * @param index   {@code gid_index}
 * @param gid     the 16 bytes of {@code union ibv_gid}
 * @param type    {@code enum ibv_gid_type}: {@link #TYPE_IB}, {@link #TYPE_ROCE_V1}, {@link #TYPE_ROCE_V2}
 * @param ifindex {@code ndev_ifindex}: the netdev of a RoCE GID (0: none)
 */
public record GidEntry(int index, byte[] gid, int type, int ifindex) {
    public static final int TYPE_IB = 0;
    public static final int TYPE_ROCE_V1 = 1;
    public static final int TYPE_ROCE_V2 = 2;

    // struct ibv_gid_entry { union ibv_gid gid; uint32_t gid_index, port_num, gid_type, ndev_ifindex; }
    private static final long SIZE = 32;
    private static final MethodHandle QUERY_GID_EX = Downcalls.bind(NativeLibraries.ibverbs(),
            NativeLibraries.IBVERBS, "_ibv_query_gid_ex", false,
            FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT, ADDRESS, JAVA_INT, JAVA_LONG),
            CAPTURE);
    private static final boolean SUPPORTED = NativeLibraries.ibverbs().find("_ibv_query_gid_ex").isPresent();

    /** Whether the loaded libibverbs has {@code ibv_query_gid_ex}. */
    public static boolean supported() {
        return SUPPORTED;
    }

    /**
     * Entry {@code index} of {@code port}'s GID table, or {@code null} when the index is unused (ENODATA, as for
     * the empty slots of a RoCE table).
     *
     * @throws VerbsException on another failure
     * @throws UnsupportedOperationException when libibverbs lacks the call ({@link #supported()})
     */
    public static GidEntry query(VerbsContext context, int port, int index) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment entry = arena.allocate(SIZE, 8);
            MemorySegment state = Errno.state();
            int rc = (int) QUERY_GID_EX.invokeExact(state, MemorySegment.ofAddress(context.address()), port, index,
                    entry, 0, SIZE);
            if (rc != 0) {
                int errno = rc > 0 ? rc : Errno.get(state);
                if (errno == Errno.ENODATA || errno == Errno.EINVAL && index > 0) {
                    return null;
                }
                throw new VerbsException("ibv_query_gid_ex(" + port + ", " + index + ")", errno);
            }
            return new GidEntry(entry.get(JAVA_INT, 16), entry.asSlice(0, 16).toArray(JAVA_BYTE),
                    entry.get(JAVA_INT, 24), entry.get(JAVA_INT, 28));
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    /** {@code IB}, {@code RoCE v1} or {@code RoCE v2}. */
    public static String typeName(int type) {
        return switch (type) {
            case TYPE_IB -> "IB";
            case TYPE_ROCE_V1 -> "RoCE v1";
            case TYPE_ROCE_V2 -> "RoCE v2";
            default -> "type " + type;
        };
    }
}
