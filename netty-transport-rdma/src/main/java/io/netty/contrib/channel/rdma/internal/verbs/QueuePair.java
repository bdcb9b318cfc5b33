package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Objects;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * A reliable-connected queue pair ({@code struct ibv_qp}), created by {@link ProtectionDomain#createQp} or by
 * rdma_cm ({@link CmId#createQp}, which also drives its state changes). {@link #postSend} and {@link #postRecv}
 * are the inline data-path verbs, called through the context's function pointers without allocating.
 */
public final class QueuePair extends NativeObject {
    private final CmId cmId;
    private final MemorySegment postSendFn;
    private final MemorySegment postRecvFn;
    private final long qp;
    private final int qpNum;
    private final boolean hasSrq;
    private final int maxSendWr;
    private final int maxRecvWr;
    private final int maxSendSge;
    private final int maxRecvSge;
    private final int maxInlineData;

    QueuePair(MemorySegment qp, ProtectionDomain pd, QpInitAttributes attributes, MemorySegment grantedInit,
              CmId cmId) {
        super("QueuePair", qp.reinterpret(IbvQp.SIZE), pd, attributes.sendCq(), attributes.recvCq(),
                attributes.srq(), cmId);
        this.cmId = cmId;
        this.postSendFn = ContextOps.require(pd.context.ops.postSend, "post_send");
        this.postRecvFn = pd.context.ops.postRecv;
        this.qp = qp.address();
        this.qpNum = (int) IbvQp.QP_NUM.get(pointer, 0L);
        this.hasSrq = attributes.srq() != null;
        this.maxSendWr = (int) IbvQpInitAttr.CAP_MAX_SEND_WR.get(grantedInit, 0L);
        this.maxRecvWr = (int) IbvQpInitAttr.CAP_MAX_RECV_WR.get(grantedInit, 0L);
        this.maxSendSge = (int) IbvQpInitAttr.CAP_MAX_SEND_SGE.get(grantedInit, 0L);
        this.maxRecvSge = (int) IbvQpInitAttr.CAP_MAX_RECV_SGE.get(grantedInit, 0L);
        this.maxInlineData = (int) IbvQpInitAttr.CAP_MAX_INLINE_DATA.get(grantedInit, 0L);
    }

    public int qpNum() {
        return qpNum;
    }

    /** Whether the QP receives through a shared receive queue. */
    public boolean usesSrq() {
        return hasSrq;
    }

    /** Granted capacities (the device may round the requested ones up). */
    public int maxSendWr() {
        return maxSendWr;
    }

    public int maxRecvWr() {
        return maxRecvWr;
    }

    public int maxSendSge() {
        return maxSendSge;
    }

    public int maxRecvSge() {
        return maxRecvSge;
    }

    public int maxInlineData() {
        return maxInlineData;
    }

    /** The current state ({@link IbvQpState}), from {@code ibv_query_qp}. */
    public int queryState() {
        checkOpen();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment attr = arena.allocate(IbvQpAttr.LAYOUT);
            MemorySegment init = arena.allocate(IbvQpInitAttr.LAYOUT);
            LibIbverbs.check("ibv_query_qp", (int) LibIbverbs.IBV_QUERY_QP.invokeExact(Errno.state(), pointer, attr,
                    IbvQpAttrMask.STATE, init));
            return (int) IbvQpAttr.QP_STATE.get(attr, 0L);
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
    }

    /** The path and transport settings the device reports ({@code ibv_query_qp}). */
    public QpAttributes queryAttributes() {
        checkOpen();
        int mask = IbvQpAttrMask.STATE | IbvQpAttrMask.PORT | IbvQpAttrMask.AV | IbvQpAttrMask.PATH_MTU
                | IbvQpAttrMask.TIMEOUT | IbvQpAttrMask.RETRY_CNT | IbvQpAttrMask.RNR_RETRY
                | IbvQpAttrMask.MIN_RNR_TIMER | IbvQpAttrMask.DEST_QPN;
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment attr = arena.allocate(IbvQpAttr.LAYOUT);
            MemorySegment init = arena.allocate(IbvQpInitAttr.LAYOUT);
            LibIbverbs.check("ibv_query_qp", (int) LibIbverbs.IBV_QUERY_QP.invokeExact(Errno.state(), pointer, attr,
                    mask, init));
            // ah_attr.port_num is what the address vector names; the QP's own port_num is the one it was bound to
            int port = Byte.toUnsignedInt((byte) IbvQpAttr.PORT_NUM.get(attr, 0L));
            if (port == 0) {
                port = Byte.toUnsignedInt((byte) IbvQpAttr.AH_ATTR_PORT_NUM.get(attr, 0L));
            }
            return new QpAttributes((int) IbvQpAttr.QP_STATE.get(attr, 0L), port,
                    (int) IbvQpAttr.PATH_MTU.get(attr, 0L),
                    Byte.toUnsignedInt((byte) IbvQpAttr.AH_ATTR_GRH_SGID_INDEX.get(attr, 0L)),
                    Byte.toUnsignedInt((byte) IbvQpAttr.AH_ATTR_GRH_TRAFFIC_CLASS.get(attr, 0L)),
                    Byte.toUnsignedInt((byte) IbvQpAttr.AH_ATTR_SL.get(attr, 0L)),
                    Byte.toUnsignedInt((byte) IbvQpAttr.TIMEOUT.get(attr, 0L)),
                    Byte.toUnsignedInt((byte) IbvQpAttr.RETRY_CNT.get(attr, 0L)),
                    Byte.toUnsignedInt((byte) IbvQpAttr.RNR_RETRY.get(attr, 0L)),
                    Byte.toUnsignedInt((byte) IbvQpAttr.MIN_RNR_TIMER.get(attr, 0L)),
                    (int) IbvQpAttr.DEST_QP_NUM.get(attr, 0L));
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
    }

    /**
     * RTS to RTS with a new minimum RNR NAK timer (IBA 11.2.4.2 and {@code man ibv_modify_qp}: an optional
     * attribute of that transition), the only one of the responder's settings a connected QP may still change.
     */
    public void modifyMinRnrTimer(int minRnrTimer) {
        if (minRnrTimer < 0 || minRnrTimer > 31) {
            throw new IllegalArgumentException("minRnrTimer: " + minRnrTimer + " (expected: 0-31)");
        }
        modify("RTS (min_rnr_timer)", IbvQpState.RTS, IbvQpAttrMask.MIN_RNR_TIMER,
                attr -> IbvQpAttr.MIN_RNR_TIMER.set(attr, 0L, (byte) minRnrTimer));
    }

    /**
     * Moves this queue pair, one of the consumer's ({@link ProtectionDomain#createQp}, not rdma_cm's), to
     * {@code state} (INIT, RTR or RTS, in that order) with the attributes rdma_cm gives {@code id} for that
     * transition ({@code rdma_init_qp_attr}), as librdmacm does for the queue pairs it drives: the RDMA READ depths
     * are the connection parameters' ({@code readDepth}); at RTR {@code pathMtu} ({@code enum ibv_mtu}, 0 keeps
     * rdma_cm's) replaces the path MTU and {@code serviceLevel} (-1 keeps rdma_cm's) the address vector's SL.
     * A failure names the step: {@code rdma_init_qp_attr(RTR)}, {@code ibv_modify_qp(RTR)}, ...
     */
    public void modifyFromCm(CmId id, int state, int readDepth, int pathMtu, int serviceLevel) {
        checkOpen();
        Objects.requireNonNull(id, "id");
        if (pathMtu < 0 || pathMtu > 5 || serviceLevel < -1 || serviceLevel > 15) {
            throw new IllegalArgumentException("pathMtu " + pathMtu + ", serviceLevel " + serviceLevel
                    + " (expected: 0-5 and -1-15)");
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment attr = arena.allocate(IbvQpAttr.LAYOUT);
            int mask = id.initQpAttr(state, attr);
            if (state == IbvQpState.RTR) {
                IbvQpAttr.MAX_DEST_RD_ATOMIC.set(attr, 0L, (byte) readDepth);
                if (pathMtu != 0) {
                    IbvQpAttr.PATH_MTU.set(attr, 0L, pathMtu);
                    mask |= IbvQpAttrMask.PATH_MTU;
                }
                if (serviceLevel >= 0) {
                    IbvQpAttr.AH_ATTR_SL.set(attr, 0L, (byte) serviceLevel);
                    mask |= IbvQpAttrMask.AV;
                }
            } else if (state == IbvQpState.RTS) {
                IbvQpAttr.MAX_RD_ATOMIC.set(attr, 0L, (byte) readDepth);
            }
            LibIbverbs.check("ibv_modify_qp(" + IbvQpState.name(state) + ")",
                    (int) LibIbverbs.IBV_MODIFY_QP.invokeExact(Errno.state(), pointer, attr, mask));
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
    }

    /** Whether rdma_cm drives this queue pair ({@link CmId#createQp}); else the consumer does. */
    public boolean cmDriven() {
        return cmId != null;
    }

    /** RESET to INIT on {@code portNum} with the remote {@link IbvAccessFlags} {@code accessFlags}. */
    public void modifyToInit(int portNum, int accessFlags) {
        modify("INIT", IbvQpState.INIT, IbvQpAttrMask.PKEY_INDEX | IbvQpAttrMask.PORT | IbvQpAttrMask.ACCESS_FLAGS,
                attr -> {
                    IbvQpAttr.PKEY_INDEX.set(attr, 0L, (short) 0);
                    IbvQpAttr.PORT_NUM.set(attr, 0L, (byte) portNum);
                    IbvQpAttr.QP_ACCESS_FLAGS.set(attr, 0L, accessFlags);
                });
    }

    /** INIT to RTR (ready to receive) towards the remote QP described by {@code rtr}. */
    public void modifyToRtr(RtrAttributes rtr) {
        Objects.requireNonNull(rtr, "rtr");
        modify("RTR", IbvQpState.RTR, IbvQpAttrMask.AV | IbvQpAttrMask.PATH_MTU | IbvQpAttrMask.DEST_QPN
                | IbvQpAttrMask.RQ_PSN | IbvQpAttrMask.MAX_DEST_RD_ATOMIC | IbvQpAttrMask.MIN_RNR_TIMER, attr -> {
                    IbvQpAttr.PATH_MTU.set(attr, 0L, rtr.pathMtu());
                    IbvQpAttr.DEST_QP_NUM.set(attr, 0L, rtr.destQpNum());
                    IbvQpAttr.RQ_PSN.set(attr, 0L, rtr.rqPsn());
                    IbvQpAttr.MAX_DEST_RD_ATOMIC.set(attr, 0L, (byte) rtr.maxDestRdAtomic());
                    IbvQpAttr.MIN_RNR_TIMER.set(attr, 0L, (byte) rtr.minRnrTimer());
                    IbvQpAttr.AH_ATTR_DLID.set(attr, 0L, (short) rtr.dlid());
                    IbvQpAttr.AH_ATTR_SL.set(attr, 0L, (byte) 0);
                    IbvQpAttr.AH_ATTR_PORT_NUM.set(attr, 0L, (byte) rtr.portNum());
                    if (rtr.dgid() != null) {
                        IbvQpAttr.AH_ATTR_IS_GLOBAL.set(attr, 0L, (byte) 1);
                        MemorySegment.copy(rtr.dgid(), 0, attr, JAVA_BYTE, IbvQpAttr.AH_ATTR_GRH_DGID_OFFSET, 16);
                        IbvQpAttr.AH_ATTR_GRH_SGID_INDEX.set(attr, 0L, (byte) rtr.sgidIndex());
                        IbvQpAttr.AH_ATTR_GRH_HOP_LIMIT.set(attr, 0L, (byte) 1);
                    }
                });
    }

    /**
     * RTR to RTS (ready to send).
     *
     * @param timeout      local ACK timeout code (4.096 us * 2^timeout)
     * @param retryCnt     transport retries (0-7)
     * @param rnrRetry     RNR retries (0-7, 7 = infinite)
     * @param maxRdAtomic  RDMA READ/atomic requests this side may have outstanding
     */
    public void modifyToRts(int sqPsn, int timeout, int retryCnt, int rnrRetry, int maxRdAtomic) {
        modify("RTS", IbvQpState.RTS, IbvQpAttrMask.SQ_PSN | IbvQpAttrMask.TIMEOUT | IbvQpAttrMask.RETRY_CNT
                | IbvQpAttrMask.RNR_RETRY | IbvQpAttrMask.MAX_QP_RD_ATOMIC, attr -> {
                    IbvQpAttr.SQ_PSN.set(attr, 0L, sqPsn);
                    IbvQpAttr.TIMEOUT.set(attr, 0L, (byte) timeout);
                    IbvQpAttr.RETRY_CNT.set(attr, 0L, (byte) retryCnt);
                    IbvQpAttr.RNR_RETRY.set(attr, 0L, (byte) rnrRetry);
                    IbvQpAttr.MAX_RD_ATOMIC.set(attr, 0L, (byte) maxRdAtomic);
                });
    }

    /** Moves to ERR: outstanding and later work requests complete with {@link IbvWcStatus#WR_FLUSH_ERR}. */
    public void modifyToError() {
        modify("ERR", IbvQpState.ERR, 0, attr -> { });
    }

    /** Back to RESET (queues emptied without completions). */
    public void modifyToReset() {
        modify("RESET", IbvQpState.RESET, 0, attr -> { });
    }

    private void modify(String target, int state, int mask, java.util.function.Consumer<MemorySegment> fill) {
        checkOpen();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment attr = arena.allocate(IbvQpAttr.LAYOUT);
            IbvQpAttr.QP_STATE.set(attr, 0L, state);
            fill.accept(attr);
            LibIbverbs.check("ibv_modify_qp(" + target + ")", (int) LibIbverbs.IBV_MODIFY_QP.invokeExact(
                    Errno.state(), pointer, attr, mask | IbvQpAttrMask.STATE));
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
    }

    /**
     * {@code ibv_post_send} of requests {@code first .. first + count - 1} of {@code wrs}, chained in that order
     * (one doorbell). Throws {@link VerbsException} naming the first rejected request if the device refuses.
     */
    public void postSend(SendWorkRequests wrs, int first, int count) {
        checkOpen();
        long head = wrs.chain(first, count);
        wrs.badWr.set(JAVA_LONG, 0, 0L);
        int rc;
        try {
            rc = (int) ContextOps.POST_SEND.invokeExact(postSendFn, qp, head, wrs.badWr.address());
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
        if (rc != 0) {
            throw postFailure("ibv_post_send", rc, wrs.indexOf(wrs.badWr.get(JAVA_LONG, 0)));
        }
    }

    /** {@code ibv_post_recv} of requests {@code first .. first + count - 1} of {@code wrs}. */
    public void postRecv(RecvWorkRequests wrs, int first, int count) {
        checkOpen();
        if (hasSrq) {
            throw new IllegalStateException("the QP receives through its shared receive queue: post there");
        }
        long head = wrs.chain(first, count);
        wrs.badWr.set(JAVA_LONG, 0, 0L);
        int rc;
        try {
            rc = (int) ContextOps.POST_RECV.invokeExact(ContextOps.require(postRecvFn, "post_recv"), qp, head,
                    wrs.badWr.address());
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
        if (rc != 0) {
            throw postFailure("ibv_post_recv", rc, wrs.indexOf(wrs.badWr.get(JAVA_LONG, 0)));
        }
    }

    static VerbsException postFailure(String call, int rc, int badIndex) {
        return new VerbsException(call, rc > 0 ? rc : Errno.EINVAL, badIndex >= 0
                ? "work request " + badIndex + " and the ones chained after it were not posted"
                : "the device did not name the refused work request (bad_wr not set)");
    }

    @Override
    void destroy() {
        if (cmId != null) {
            cmId.destroyQp(this);
            return;
        }
        try {
            LibIbverbs.check("ibv_destroy_qp", (int) LibIbverbs.IBV_DESTROY_QP.invokeExact(Errno.state(), pointer));
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
    }
}
