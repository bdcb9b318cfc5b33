package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Objects;

/**
 * What an RC queue pair is created with ({@code struct ibv_qp_init_attr}).
 *
 * @param srq       the shared receive queue, or {@code null} for the QP's own receive queue
 * @param sqSigAll  whether every send is signalled regardless of {@link IbvSendFlags#SIGNALED}
 */
public record QpInitAttributes(CompletionQueue sendCq, CompletionQueue recvCq, SharedReceiveQueue srq,
                               int maxSendWr, int maxRecvWr, int maxSendSge, int maxRecvSge, int maxInlineData,
                               boolean sqSigAll) {
    static final int IBV_QPT_RC = 2;

    public QpInitAttributes {
        Objects.requireNonNull(sendCq, "sendCq");
        Objects.requireNonNull(recvCq, "recvCq");
        if (maxSendWr <= 0 || maxSendSge <= 0 || maxInlineData < 0 || maxRecvWr < 0 || maxRecvSge < 0
                || (srq == null && (maxRecvWr == 0 || maxRecvSge == 0))) {
            throw new IllegalArgumentException("maxSendWr " + maxSendWr + ", maxRecvWr " + maxRecvWr
                    + ", maxSendSge " + maxSendSge + ", maxRecvSge " + maxRecvSge + ", maxInlineData "
                    + maxInlineData + " (expected: send sizes > 0, receive sizes > 0 without an SRQ)");
        }
    }

    void check(VerbsContext context) {
        sendCq.checkOpen();
        recvCq.checkOpen();
        if (srq != null) {
            srq.checkOpen();
        }
        long device = context.address();
        if (sendCq.context.address() != device || recvCq.context.address() != device
                || (srq != null && srq.pd.context.address() != device)) {
            throw new IllegalArgumentException("the CQs/SRQ belong to another device context than the PD");
        }
    }

    MemorySegment write(Arena arena) {
        MemorySegment init = arena.allocate(IbvQpInitAttr.LAYOUT);
        IbvQpInitAttr.SEND_CQ.set(init, 0L, sendCq.pointer);
        IbvQpInitAttr.RECV_CQ.set(init, 0L, recvCq.pointer);
        IbvQpInitAttr.SRQ.set(init, 0L, srq == null ? MemorySegment.NULL : srq.pointer);
        IbvQpInitAttr.CAP_MAX_SEND_WR.set(init, 0L, maxSendWr);
        IbvQpInitAttr.CAP_MAX_RECV_WR.set(init, 0L, srq == null ? maxRecvWr : 0);
        IbvQpInitAttr.CAP_MAX_SEND_SGE.set(init, 0L, maxSendSge);
        IbvQpInitAttr.CAP_MAX_RECV_SGE.set(init, 0L, srq == null ? maxRecvSge : 0);
        IbvQpInitAttr.CAP_MAX_INLINE_DATA.set(init, 0L, maxInlineData);
        IbvQpInitAttr.QP_TYPE.set(init, 0L, IBV_QPT_RC);
        IbvQpInitAttr.SQ_SIG_ALL.set(init, 0L, sqSigAll ? 1 : 0);
        return init;
    }
}
