package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;

/**
 * The connection parameters of {@code rdma_connect}/{@code rdma_accept} ({@code struct rdma_conn_param}).
 *
 * @param privateData         up to 255 bytes for the peer (the transport limits what fits: 56 on connect over IB)
 * @param responderResources  RDMA READs the peer may have outstanding towards us
 * @param initiatorDepth      RDMA READs we may have outstanding towards the peer
 * @param retryCount          transport retries (0-7; ignored on accept)
 * @param rnrRetryCount       RNR retries (0-7, 7 = infinite)
 * @param qpNum               the QP number to announce when the id has no QP of its own (the consumer drives
 *                            its QP and calls {@code rdma_establish}); 0 otherwise
 * @param srq                 with {@code qpNum}: whether that QP receives through a shared receive queue
 *                            (librdmacm takes it from the id's QP otherwise)
 */
public record ConnParam(byte[] privateData, int responderResources, int initiatorDepth, int retryCount,
                        int rnrRetryCount, int qpNum, boolean srq) {
    public static final int MAX_PRIVATE_DATA = 255;

    public ConnParam {
        privateData = privateData == null ? new byte[0] : privateData.clone();
        if (privateData.length > MAX_PRIVATE_DATA) {
            throw new IllegalArgumentException("privateData: " + privateData.length + " bytes (expected: <= "
                    + MAX_PRIVATE_DATA + ")");
        }
        check("responderResources", responderResources, 255);
        check("initiatorDepth", initiatorDepth, 255);
        check("retryCount", retryCount, 7);
        check("rnrRetryCount", rnrRetryCount, 7);
    }

    /** {@code privateData} with one outstanding READ each way, 7 retries, infinite RNR retry. */
    public static ConnParam of(byte[] privateData) {
        return new ConnParam(privateData, 1, 1, 7, 7, 0, false);
    }

    /** The same parameters announcing {@code qpNum} (for an id without a QP). */
    public ConnParam withQpNum(int qpNum) {
        return withQp(qpNum, false);
    }

    /** The same parameters announcing {@code qpNum}, a QP of the consumer's that uses an SRQ or not. */
    public ConnParam withQp(int qpNum, boolean srq) {
        return new ConnParam(privateData, responderResources, initiatorDepth, retryCount, rnrRetryCount, qpNum,
                srq);
    }

    @Override
    public byte[] privateData() {
        return privateData.clone();
    }

    MemorySegment write(Arena arena) {
        MemorySegment param = arena.allocate(RdmaConnParam.LAYOUT);
        if (privateData.length > 0) {
            MemorySegment data = arena.allocate(privateData.length);
            MemorySegment.copy(privateData, 0, data, JAVA_BYTE, 0, privateData.length);
            RdmaConnParam.PRIVATE_DATA.set(param, 0L, data);
        }
        RdmaConnParam.PRIVATE_DATA_LEN.set(param, 0L, (byte) privateData.length);
        RdmaConnParam.RESPONDER_RESOURCES.set(param, 0L, (byte) responderResources);
        RdmaConnParam.INITIATOR_DEPTH.set(param, 0L, (byte) initiatorDepth);
        RdmaConnParam.RETRY_COUNT.set(param, 0L, (byte) retryCount);
        RdmaConnParam.RNR_RETRY_COUNT.set(param, 0L, (byte) rnrRetryCount);
        RdmaConnParam.QP_NUM.set(param, 0L, qpNum);
        RdmaConnParam.SRQ.set(param, 0L, (byte) (srq ? 1 : 0));
        return param;
    }

    private static void check(String name, int value, int max) {
        if (value < 0 || value > max) {
            throw new IllegalArgumentException(name + ": " + value + " (expected: 0-" + max + ")");
        }
    }
}
