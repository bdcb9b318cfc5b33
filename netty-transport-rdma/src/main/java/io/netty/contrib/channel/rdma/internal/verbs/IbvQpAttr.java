package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.GroupLayout;
import java.lang.invoke.VarHandle;

import static io.netty.contrib.channel.rdma.internal.verbs.Layouts.*;

/** {@code struct ibv_qp_attr}: argument of {@code ibv_modify_qp}/{@code ibv_query_qp}. */
final class IbvQpAttr {
    static final GroupLayout LAYOUT = struct("ibv_qp_attr",
            U32.withName("qp_state"),
            U32.withName("cur_qp_state"),
            U32.withName("path_mtu"),
            U32.withName("path_mig_state"),
            U32.withName("qkey"),
            U32.withName("rq_psn"),
            U32.withName("sq_psn"),
            U32.withName("dest_qp_num"),
            U32.withName("qp_access_flags"),
            IbvQpCap.LAYOUT.withName("cap"),
            IbvAhAttr.LAYOUT.withName("ah_attr"),
            IbvAhAttr.LAYOUT.withName("alt_ah_attr"),
            U16.withName("pkey_index"),
            U16.withName("alt_pkey_index"),
            U8.withName("en_sqd_async_notify"),
            U8.withName("sq_draining"),
            U8.withName("max_rd_atomic"),
            U8.withName("max_dest_rd_atomic"),
            U8.withName("min_rnr_timer"),
            U8.withName("port_num"),
            U8.withName("timeout"),
            U8.withName("retry_cnt"),
            U8.withName("rnr_retry"),
            U8.withName("alt_port_num"),
            U8.withName("alt_timeout"),
            U32.withName("rate_limit"));
    static final long SIZE = LAYOUT.byteSize();
    static final VarHandle QP_STATE = field(LAYOUT, "qp_state");
    static final VarHandle CUR_QP_STATE = field(LAYOUT, "cur_qp_state");
    static final VarHandle PATH_MTU = field(LAYOUT, "path_mtu");
    static final VarHandle QKEY = field(LAYOUT, "qkey");
    static final VarHandle RQ_PSN = field(LAYOUT, "rq_psn");
    static final VarHandle SQ_PSN = field(LAYOUT, "sq_psn");
    static final VarHandle DEST_QP_NUM = field(LAYOUT, "dest_qp_num");
    static final VarHandle QP_ACCESS_FLAGS = field(LAYOUT, "qp_access_flags");
    static final VarHandle CAP_MAX_SEND_WR = field(LAYOUT, "cap.max_send_wr");
    static final VarHandle CAP_MAX_RECV_WR = field(LAYOUT, "cap.max_recv_wr");
    static final VarHandle CAP_MAX_SEND_SGE = field(LAYOUT, "cap.max_send_sge");
    static final VarHandle CAP_MAX_RECV_SGE = field(LAYOUT, "cap.max_recv_sge");
    static final VarHandle CAP_MAX_INLINE_DATA = field(LAYOUT, "cap.max_inline_data");
    static final long AH_ATTR_GRH_DGID_OFFSET = offset(LAYOUT, "ah_attr.grh.dgid");
    static final VarHandle AH_ATTR_GRH_FLOW_LABEL = field(LAYOUT, "ah_attr.grh.flow_label");
    static final VarHandle AH_ATTR_GRH_SGID_INDEX = field(LAYOUT, "ah_attr.grh.sgid_index");
    static final VarHandle AH_ATTR_GRH_HOP_LIMIT = field(LAYOUT, "ah_attr.grh.hop_limit");
    static final VarHandle AH_ATTR_GRH_TRAFFIC_CLASS = field(LAYOUT, "ah_attr.grh.traffic_class");
    static final VarHandle AH_ATTR_DLID = field(LAYOUT, "ah_attr.dlid");
    static final VarHandle AH_ATTR_SL = field(LAYOUT, "ah_attr.sl");
    static final VarHandle AH_ATTR_IS_GLOBAL = field(LAYOUT, "ah_attr.is_global");
    static final VarHandle AH_ATTR_PORT_NUM = field(LAYOUT, "ah_attr.port_num");
    static final VarHandle PKEY_INDEX = field(LAYOUT, "pkey_index");
    static final VarHandle MAX_RD_ATOMIC = field(LAYOUT, "max_rd_atomic");
    static final VarHandle MAX_DEST_RD_ATOMIC = field(LAYOUT, "max_dest_rd_atomic");
    static final VarHandle MIN_RNR_TIMER = field(LAYOUT, "min_rnr_timer");
    static final VarHandle PORT_NUM = field(LAYOUT, "port_num");
    static final VarHandle TIMEOUT = field(LAYOUT, "timeout");
    static final VarHandle RETRY_CNT = field(LAYOUT, "retry_cnt");
    static final VarHandle RNR_RETRY = field(LAYOUT, "rnr_retry");

    private IbvQpAttr() {
    }
}
