package io.netty.contrib.channel.rdma.internal.verbs;

/** {@code enum ibv_qp_attr_mask}: which {@code ibv_qp_attr} fields a modify or query uses. */
final class IbvQpAttrMask {
    static final int STATE = 1;
    static final int ACCESS_FLAGS = 1 << 3;
    static final int PKEY_INDEX = 1 << 4;
    static final int PORT = 1 << 5;
    static final int AV = 1 << 7;
    static final int PATH_MTU = 1 << 8;
    static final int TIMEOUT = 1 << 9;
    static final int RETRY_CNT = 1 << 10;
    static final int RNR_RETRY = 1 << 11;
    static final int RQ_PSN = 1 << 12;
    static final int MAX_QP_RD_ATOMIC = 1 << 13;
    static final int MIN_RNR_TIMER = 1 << 15;
    static final int SQ_PSN = 1 << 16;
    static final int MAX_DEST_RD_ATOMIC = 1 << 17;
    static final int CAP = 1 << 19;
    static final int DEST_QPN = 1 << 20;

    private IbvQpAttrMask() {
    }
}
