"""The lineage graph, computed for the Lineage screen: pure functions, no Textual or Rich (the widget in
ratui/widgets/lineage_graph.py only styles what they compute). One module per job:

- layout.py: where each pipeline goes (columns, the order within a column, rows): steps 1-4 below
- routing.py: the tracks of the edges between two columns: step 5
- drawing.py: the layout drawn as lines of text runs, each run knowing the node or edges it shows
- navigation.py: what a selection lights (ancestors, descendants) and where an arrow key moves it
- focus.py: a pipeline's neighbourhood to a depth, for a project too large to lay out whole
- view.py: what the screen shows (the whole graph when it fits, else a focus), laid out and drawn in a worker

A layered drawing (Sugiyama's method, kept small):

A layered drawing (Sugiyama's method, kept small):

1. columns: a pipeline's column is 1 + the longest path from a root, so roots are on the left and every edge
   goes left to right. A cycle (a broken project) is cut at one edge, kept aside as a back edge, so the rest
   still lays out.
2. an edge that spans several columns gets a waypoint in each column it passes, so every link joins two
   neighbouring columns (the waypoint is drawn as a line through that column).
3. the order within each column: barycentre sweeps down and up, keeping the order with the fewest crossings.
4. rows: each node moves towards the mean row of its neighbours, keeping the order and a blank line between two
   nodes (a least-squares fit under those constraints).
5. routing: in the gap between two columns every target with several parents (or one on another row) gets a
   vertical track; each parent's line runs along its row to its targets' tracks, a track runs to its target's
   row and a line from there to the target's arrow. Tracks are ordered for the fewest crossings, and two lines
   never share a row (a target that would have to is moved down a row). A crossing is drawn as the vertical line
   passing through the horizontal one, never as a junction, so a line is never seen to join another it does not.
"""
