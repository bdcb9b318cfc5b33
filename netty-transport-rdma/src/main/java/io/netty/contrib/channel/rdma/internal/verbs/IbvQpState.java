package io.netty.contrib.channel.rdma.internal.verbs;

/** {@code enum ibv_qp_state}. */
public final class IbvQpState {
    public static final int RESET = 0;
    public static final int INIT = 1;
    public static final int RTR = 2;
    public static final int RTS = 3;
    public static final int SQD = 4;
    public static final int SQE = 5;
    public static final int ERR = 6;

    private static final String[] NAMES = {"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR", "UNKNOWN"};

    private IbvQpState() {
    }

    public static String name(int state) {
        return state >= 0 && state < NAMES.length ? NAMES[state] : "UNKNOWN(" + state + ")";
    }
}
