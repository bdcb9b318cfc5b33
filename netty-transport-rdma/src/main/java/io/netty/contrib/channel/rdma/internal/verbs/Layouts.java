package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.GroupLayout;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemoryLayout.PathElement;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SequenceLayout;
import java.lang.foreign.StructLayout;
import java.lang.foreign.UnionLayout;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;

/**
 * Builds C struct layouts the way an x86_64 C compiler does (each member at its natural alignment, the whole
 * padded to the largest alignment) and resolves dotted field paths ({@code "wr.rdma.rkey"}) to var handles.
 * The layout test checks every named member against {@code offsetof}/{@code sizeof} from the real headers.
 */
final class Layouts {
    static final ValueLayout.OfByte U8 = ValueLayout.JAVA_BYTE;
    static final ValueLayout.OfShort U16 = ValueLayout.JAVA_SHORT;
    static final ValueLayout.OfShort BE16 = ValueLayout.JAVA_SHORT.withOrder(ByteOrder.BIG_ENDIAN);
    static final ValueLayout.OfInt U32 = ValueLayout.JAVA_INT;
    static final ValueLayout.OfInt BE32 = ValueLayout.JAVA_INT.withOrder(ByteOrder.BIG_ENDIAN);
    static final ValueLayout.OfLong U64 = ValueLayout.JAVA_LONG;
    static final ValueLayout.OfLong BE64 = ValueLayout.JAVA_LONG.withOrder(ByteOrder.BIG_ENDIAN);
    static final ValueLayout POINTER = ValueLayout.ADDRESS;
    /** A pointer read and written as a plain {@code long} address: no segment object on the data path. */
    static final ValueLayout.OfLong POINTER_BITS = ValueLayout.JAVA_LONG;
    /**
     * All native memory as one segment, for the data path's arrays (work requests, completions, SGEs): a constant
     * segment whose accesses the JIT reduces to a load or a store (through an array's own shared-arena segment
     * every access also checked its session, bounds and enclosing layout). Each of those classes checks the index
     * and that it is open itself, as its own segment would have.
     */
    static final MemorySegment NATIVE = MemorySegment.NULL.reinterpret(Long.MAX_VALUE);

    private Layouts() {
    }

    /** A C struct: padding inserted before members as alignment requires, and at the end. */
    static StructLayout struct(String name, MemoryLayout... members) {
        List<MemoryLayout> laid = new ArrayList<>();
        long offset = 0;
        long alignment = 1;
        for (MemoryLayout member : members) {
            long a = member.byteAlignment();
            long aligned = align(offset, a);
            if (aligned > offset) {
                laid.add(MemoryLayout.paddingLayout(aligned - offset));
            }
            laid.add(member);
            offset = aligned + member.byteSize();
            alignment = Math.max(alignment, a);
        }
        long size = align(offset, alignment);
        if (size > offset) {
            laid.add(MemoryLayout.paddingLayout(size - offset));
        }
        return MemoryLayout.structLayout(laid.toArray(MemoryLayout[]::new)).withName(name);
    }

    /** A C union, padded to its largest alignment. */
    static UnionLayout union(String name, MemoryLayout... members) {
        long size = 0;
        long alignment = 1;
        for (MemoryLayout member : members) {
            size = Math.max(size, member.byteSize());
            alignment = Math.max(alignment, member.byteAlignment());
        }
        MemoryLayout[] all = members;
        long padded = align(size, alignment);
        if (padded > size) {
            all = new MemoryLayout[members.length + 1];
            System.arraycopy(members, 0, all, 0, members.length);
            all[members.length] = MemoryLayout.paddingLayout(padded);
        }
        return MemoryLayout.unionLayout(all).withName(name);
    }

    /**
     * A C11 anonymous union: its members are named as members of the enclosing struct ({@code imm_data} and
     * {@code invalidate_rkey} of {@code struct ibv_send_wr}), and {@link #field} finds them there.
     */
    static UnionLayout anonymousUnion(MemoryLayout... members) {
        return union("", members).withoutName();
    }

    /** A char/byte array member. */
    static SequenceLayout bytes(String name, long length) {
        return MemoryLayout.sequenceLayout(length, U8).withName(name);
    }

    /** An opaque member we never look into (e.g. {@code pthread_mutex_t}), with its size and alignment. */
    static SequenceLayout opaque(String name, long size, long alignment) {
        return MemoryLayout.sequenceLayout(size, U8).withByteAlignment(alignment).withName(name);
    }

    /** Bytes the bindings never name (compatibility slots, anonymous unions), with their C alignment. */
    static SequenceLayout reserved(long size, long alignment) {
        return MemoryLayout.sequenceLayout(size, U8).withByteAlignment(alignment);
    }

    /** The path to a dotted field; a name not found in a group is looked up in its anonymous unions. */
    static PathElement[] path(GroupLayout layout, String dotted) {
        List<PathElement> path = new ArrayList<>();
        GroupLayout group = layout;
        for (String name : dotted.split("\\.")) {
            MemoryLayout member = find(group, name, path);
            if (member == null) {
                throw new IllegalArgumentException(layout.name().orElse("layout") + " has no member " + dotted);
            }
            group = member instanceof GroupLayout nested ? nested : null;
        }
        return path.toArray(PathElement[]::new);
    }

    /** Appends the path from {@code group} to its member {@code name} (through anonymous unions) to {@code path}. */
    private static MemoryLayout find(GroupLayout group, String name, List<PathElement> path) {
        if (group == null) {
            return null;
        }
        List<MemoryLayout> members = group.memberLayouts();
        for (int i = 0; i < members.size(); i++) {
            MemoryLayout member = members.get(i);
            if (member.name().isPresent() && member.name().get().equals(name)) {
                path.add(PathElement.groupElement(name));
                return member;
            }
        }
        for (int i = 0; i < members.size(); i++) {
            if (members.get(i).name().isEmpty() && members.get(i) instanceof GroupLayout anonymous) {
                path.add(PathElement.groupElement(i));
                MemoryLayout found = find(anonymous, name, path);
                if (found != null) {
                    return found;
                }
                path.removeLast();
            }
        }
        return null;
    }

    /** Var handle for a field: coordinates are {@code (MemorySegment segment, long structOffset)}. */
    static VarHandle field(GroupLayout layout, String dotted) {
        return layout.varHandle(path(layout, dotted));
    }

    static long offset(GroupLayout layout, String dotted) {
        return layout.byteOffset(path(layout, dotted));
    }

    // The data-path arrays' accessors: a constant layout on the constant segment, so that an access is a plain load
    // or store even where the JIT compiles the accessor on its own rather than inline (deep in a pipeline).

    static int getInt(long address) {
        return NATIVE.get(U32, address);
    }

    static void setInt(long address, int value) {
        NATIVE.set(U32, address, value);
    }

    /** A 32-bit member the verbs ABI keeps in network byte order ({@code imm_data}). */
    static int getIntBigEndian(long address) {
        return NATIVE.get(BE32, address);
    }

    static void setIntBigEndian(long address, int value) {
        NATIVE.set(BE32, address, value);
    }

    static long getLong(long address) {
        return NATIVE.get(U64, address);
    }

    static void setLong(long address, long value) {
        NATIVE.set(U64, address, value);
    }

    private static long align(long offset, long alignment) {
        return (offset + alignment - 1) & -alignment;
    }
}
