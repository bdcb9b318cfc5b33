package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Objects;

/** A protection domain ({@code struct ibv_pd}): registers memory, allocates memory windows, creates QPs and SRQs. */
public final class ProtectionDomain extends NativeObject {
    final VerbsContext context;

    ProtectionDomain(MemorySegment pd, VerbsContext context) {
        super("ProtectionDomain", pd.reinterpret(IbvPd.SIZE), context);
        this.context = context;
    }

    public VerbsContext context() {
        return context;
    }

    /**
     * Registers {@code segment} (native memory) with {@link IbvAccessFlags} {@code access}: {@code ibv_reg_mr}, or
     * {@code ibv_reg_mr_iova2} when optional flags such as {@link IbvAccessFlags#RELAXED_ORDERING} are present.
     * The caller keeps the memory alive until the region is closed.
     */
    public MemoryRegion registerMemory(MemorySegment segment, int access) {
        checkOpen();
        Objects.requireNonNull(segment, "segment");
        if (!segment.isNative()) {
            throw new IllegalArgumentException("segment is not native memory (heap memory cannot be registered)");
        }
        if (segment.isReadOnly() && (access & (IbvAccessFlags.LOCAL_WRITE | IbvAccessFlags.REMOTE_WRITE)) != 0) {
            throw new IllegalArgumentException("segment is read-only but the access flags allow writes");
        }
        String call = "ibv_reg_mr(" + segment.byteSize() + " bytes, access 0x" + Integer.toHexString(access) + ")";
        try {
            MemorySegment mr;
            if ((access & IbvAccessFlags.OPTIONAL_RANGE) == 0) {
                mr = (MemorySegment) LibIbverbs.IBV_REG_MR.invokeExact(Errno.state(), pointer, segment,
                        segment.byteSize(), access);
            } else {
                mr = (MemorySegment) LibIbverbs.IBV_REG_MR_IOVA2.invokeExact(Errno.state(), pointer, segment,
                        segment.byteSize(), segment.address(), access);
            }
            if (mr.address() == 0) {
                int errno = Errno.last();
                throw new VerbsException(call, errno, errno == Errno.ENOMEM || errno == Errno.EPERM
                        ? "pinned memory is limited by RLIMIT_MEMLOCK; raise it (ulimit -l)" : null);
            }
            return new MemoryRegion(mr, segment, access, this);
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
    }

    /**
     * {@code ibv_alloc_mw}: a memory window of {@link IbvMwType} {@code type}, unbound. Devices without windows
     * fail with {@code EOPNOTSUPP}; {@link DeviceAttributes#supportsType2Windows()} tells beforehand.
     */
    public MemoryWindow allocMw(int type) {
        checkOpen();
        if (type != IbvMwType.TYPE_1 && type != IbvMwType.TYPE_2) {
            throw new IllegalArgumentException("type: " + type + " (expected: IbvMwType.TYPE_1 or TYPE_2)");
        }
        String call = "ibv_alloc_mw(type " + type + ")";
        MemorySegment allocFn = context.ops.allocMw;
        MemorySegment deallocFn = context.ops.deallocMw;
        if (allocFn.address() == 0 || deallocFn.address() == 0) {
            throw new VerbsException(call, Errno.EOPNOTSUPP, "the device has no memory windows"
                    + " (ibv_context.ops.alloc_mw or dealloc_mw is NULL)");
        }
        try {
            MemorySegment mw = (MemorySegment) ContextOps.ALLOC_MW.invokeExact(allocFn, Errno.state(), pointer, type);
            if (mw.address() == 0) {
                int errno = Errno.last();
                throw new VerbsException(call, errno == 0 ? Errno.EINVAL : errno, errno == Errno.ENOMEM
                        ? "the device's memory windows are exhausted (DeviceAttributes.maxMw)" : null);
            }
            return new MemoryWindow(mw, this, deallocFn);
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
    }

    /** {@code ibv_create_qp} (RC). The granted capacities are readable on the result. */
    public QueuePair createQp(QpInitAttributes attributes) {
        checkOpen();
        Objects.requireNonNull(attributes, "attributes");
        attributes.check(context);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment init = attributes.write(arena);
            MemorySegment qp = LibIbverbs.checkPointer("ibv_create_qp",
                    (MemorySegment) LibIbverbs.IBV_CREATE_QP.invokeExact(Errno.state(), pointer, init));
            return new QueuePair(qp, this, attributes, init, null);
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
    }

    /** {@code ibv_create_srq}. */
    public SharedReceiveQueue createSrq(int maxWr, int maxSge, int srqLimit) {
        checkOpen();
        if (maxWr <= 0 || maxSge <= 0 || srqLimit < 0) {
            throw new IllegalArgumentException("maxWr " + maxWr + ", maxSge " + maxSge + ", srqLimit " + srqLimit
                    + " (expected: maxWr > 0, maxSge > 0, srqLimit >= 0)");
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment init = arena.allocate(IbvSrqInitAttr.LAYOUT);
            IbvSrqInitAttr.ATTR_MAX_WR.set(init, 0L, maxWr);
            IbvSrqInitAttr.ATTR_MAX_SGE.set(init, 0L, maxSge);
            IbvSrqInitAttr.ATTR_SRQ_LIMIT.set(init, 0L, srqLimit);
            MemorySegment srq = LibIbverbs.checkPointer("ibv_create_srq",
                    (MemorySegment) LibIbverbs.IBV_CREATE_SRQ.invokeExact(Errno.state(), pointer, init));
            return new SharedReceiveQueue(srq, this, (int) IbvSrqInitAttr.ATTR_MAX_WR.get(init, 0L),
                    (int) IbvSrqInitAttr.ATTR_MAX_SGE.get(init, 0L));
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
    }

    @Override
    void destroy() {
        try {
            LibIbverbs.check("ibv_dealloc_pd", (int) LibIbverbs.IBV_DEALLOC_PD.invokeExact(Errno.state(), pointer));
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
    }
}
