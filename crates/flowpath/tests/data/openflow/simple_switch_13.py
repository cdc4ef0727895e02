# A MAC-learning switch for os-ken, behaving as the `simple_switch_13` sample app that Ryu
# shipped (os-ken's PyPI package no longer ships the sample apps), so that
# `osken-manager simple_switch_13.py` drives a switch with exactly the messages people
# know from it:
#   - on the features reply: a table-miss flow (table 0, priority 0, empty match,
#     apply_actions output:CONTROLLER max_len=NO_BUFFER);
#   - on a packet_in: reads msg.match['in_port'], msg.buffer_id, msg.data; drops LLDP;
#     learns src -> in_port; if dst is known, a flow_mod (priority 1, match in_port +
#     eth_dst + eth_src, apply_actions output:PORT; with buffer_id when the packet_in had
#     one, and then no packet_out), else output FLOOD; then a packet_out with the same
#     buffer_id, in_port and actions (and the data when buffer_id is NO_BUFFER).
# Each packet_in is logged as "packet in DPID SRC DST IN_PORT" (the tests count them).
from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import CONFIG_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
from os_ken.lib.packet import ether_types, ethernet, packet
from os_ken.ofproto import ofproto_v1_3


class LearningSwitch13(app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.tables = {}

    def flow(self, dp, priority, match, actions, buffer_id=None):
        p, o = dp.ofproto_parser, dp.ofproto
        kw = {} if buffer_id is None else {"buffer_id": buffer_id}
        dp.send_msg(p.OFPFlowMod(
            datapath=dp, priority=priority, match=match,
            instructions=[p.OFPInstructionActions(o.OFPIT_APPLY_ACTIONS, actions)], **kw))

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def on_features(self, ev):
        dp = ev.msg.datapath
        p, o = dp.ofproto_parser, dp.ofproto
        self.flow(dp, 0, p.OFPMatch(), [p.OFPActionOutput(o.OFPP_CONTROLLER, o.OFPCML_NO_BUFFER)])

    @set_ev_cls(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
    def on_packet_in(self, ev):
        msg = ev.msg
        dp = msg.datapath
        p, o = dp.ofproto_parser, dp.ofproto
        in_port = msg.match["in_port"]
        eth = packet.Packet(msg.data).get_protocols(ethernet.ethernet)[0]
        if eth.ethertype == ether_types.ETH_TYPE_LLDP:
            return
        self.logger.info("packet in %s %s %s %s", dp.id, eth.src, eth.dst, in_port)
        macs = self.tables.setdefault(dp.id, {})
        macs[eth.src] = in_port
        out_port = macs.get(eth.dst, o.OFPP_FLOOD)
        actions = [p.OFPActionOutput(out_port)]
        if out_port != o.OFPP_FLOOD:
            match = p.OFPMatch(in_port=in_port, eth_dst=eth.dst, eth_src=eth.src)
            if msg.buffer_id != o.OFP_NO_BUFFER:
                self.flow(dp, 1, match, actions, msg.buffer_id)
                return
            self.flow(dp, 1, match, actions)
        data = msg.data if msg.buffer_id == o.OFP_NO_BUFFER else None
        dp.send_msg(p.OFPPacketOut(datapath=dp, buffer_id=msg.buffer_id, in_port=in_port,
                                   actions=actions, data=data))
