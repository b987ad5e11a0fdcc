#!/usr/bin/ruby
# Reads a capture through pcaprub (Debian's ruby-pcaprub) and prints what
# libpcap hands over: link type, snapshot length, every packet with and
# without a filter. Usage: pcaprub_read.rb CAPTURE
require 'pcaprub'

file = ARGV[0] or abort "usage: #{$0} CAPTURE"
cap = PCAPRUB::Pcap.open_offline(file)
puts "datalink #{cap.datalink} snapshot #{cap.snapshot}"
n = 0
cap.each_packet do |pkt|
  n += 1
  puts "pkt #{n} #{pkt.time.to_i}.#{format('%06d', pkt.microsec)} len #{pkt.length} caplen #{pkt.caplen} first #{pkt.data[0, 4].unpack1('H8')}"
end
puts "#{n} packets"
cap = PCAPRUB::Pcap.open_offline(file)
cap.setfilter('tcp')
n = 0
cap.each_data { |d| n += 1; puts "tcp #{n} #{d.bytesize} bytes" }
begin
  cap.setfilter('tcp port')
rescue => e
  puts "bad filter: #{e.class}: #{e.message}"
end
puts "#{n} tcp packets"
